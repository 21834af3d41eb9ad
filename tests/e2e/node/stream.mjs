// One streamed chat completion through the gateway with openai-node, both ways the library
// offers (`create({stream: true})` and the `.stream()` helper); prints what the reader saw as
// JSON: {"text", "report", "helper_text"}. Env: BASE_URL, POLICY, QUESTION. (openai-node 5+: the helper
// is chat.completions.stream, no longer under beta.)
import OpenAI from "openai";

const client = new OpenAI({baseURL: process.env.BASE_URL, apiKey: "sk-test", maxRetries: 0,
                           defaultHeaders: {"x-veracity-policy": process.env.POLICY}});
const messages = [{role: "user", content: process.env.QUESTION}];
let text = "", report = null;
const stream = await client.chat.completions.create({model: "gpt-test", messages, stream: true});
for await (const chunk of stream) {
  if (chunk.veracity) report = chunk.veracity;
  for (const ch of chunk.choices) text += ch.delta?.content ?? "";
}
const runner = client.chat.completions.stream({model: "gpt-test", messages});
let helper_text = "";
runner.on("content", (delta) => { helper_text += delta; });
await runner.finalChatCompletion();
console.log(JSON.stringify({text, report, helper_text}));
