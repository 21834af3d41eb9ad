// openai-node against the gateway: `node responses.mjs <baseURL> <model> <question>` prints one JSON
// line with what a non-stream and a streamed responses.create returned (tests/e2e/test_responses_node.py).
import OpenAI from "openai";

const [baseURL, model, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "sk-node", maxRetries: 0, timeout: 120000,
  defaultHeaders: { "x-veracity-policy": "buffer" } });

const { data: resp, response: raw } = await client.responses.create({ model, input: question }).withResponse();
const stream = await client.responses.create({ model, input: question, stream: true });
const types = [];
const seq = [];
let text = "";
let completed = null;
for await (const event of stream) {
  types.push(event.type);
  seq.push(event.sequence_number);
  if (event.type === "response.output_text.delta") text += event.delta;
  if (event.type === "response.completed") completed = event.response;
}
console.log(JSON.stringify({
  output_text: resp.output_text, veracity: resp.veracity, status_header: raw.headers.get("x-veracity-status"),
  request_id: raw.headers.get("x-request-id"), stream_types: types, stream_seq: seq, stream_text: text,
  stream_output_text: completed && completed.output.filter((i) => i.type === "message")
    .flatMap((i) => i.content).filter((p) => p.type === "output_text").map((p) => p.text).join(""), stream_veracity: completed && completed.veracity,
}));
