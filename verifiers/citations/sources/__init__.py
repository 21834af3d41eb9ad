"""Bibliographic sources. Each answers with a :class:`SourceResult`; see ``_base``."""

from verifiers.citations.sources._base import HttpSource, SourceResult
from verifiers.citations.sources.arxiv import Arxiv
from verifiers.citations.sources.crossref import Crossref
from verifiers.citations.sources.dblp import Dblp
from verifiers.citations.sources.openalex import OpenAlex
from verifiers.citations.sources.semantic_scholar import SemanticScholar

#: source name (a ``sources.use`` entry) -> its client class
NETWORK_SOURCES = {"crossref": Crossref, "openalex": OpenAlex, "arxiv": Arxiv,
                   "semantic_scholar": SemanticScholar, "dblp": Dblp}

__all__ = ["HttpSource", "SourceResult", "NETWORK_SOURCES", "Crossref", "OpenAlex", "Arxiv", "SemanticScholar", "Dblp"]
