// clients_tools.js -- the SDK calls of testing/oracle_clients_tools.py, run against one server (argv: base URL,
// the config as JSON). Prints one JSON object: each SDK's result and every request body the SDKs sent (recorded by
// a fetch wrapper) with the HTTP status it got. Needs openai@6, ai@5, @ai-sdk/openai-compatible@1,
// @langchain/openai@1 and @langchain/core@1 in ./node_modules.
const OpenAI = require('openai');
const { generateObject, generateText, jsonSchema, tool, stepCountIs } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { ChatOpenAI } = require('@langchain/openai');
const { HumanMessage, ToolMessage } = require('@langchain/core/messages');

const [base, cfgText] = process.argv.slice(2);
const cfg = JSON.parse(cfgText);
const sent = [];
let label = '';
const rec = async (url, init) => {
  const r = await fetch(url, init);
  let body = null;
  try { body = JSON.parse(init && init.body); } catch (e) { body = String(init && init.body); }
  sent.push({ sdk: label, path: new URL(String(url)).pathname, status: r.status, body });
  return r;
};
const run = async (name, fn) => {
  label = name;
  try { return await fn(); } catch (e) { return { error: String(e && e.message || e).slice(0, 600) }; }
};
// what a tool returns in every loop: fixed, so the second request is the same on both servers
const result = (name, args) => JSON.stringify({ tool: name, ok: true, args });
const oaiCall = (c) => ({ name: c.function.name, arguments: c.function.arguments, id: c.id });
const oaiChoice = (r) => ({ content: r.choices[0].message.content,
                            reasoning: r.choices[0].message.reasoning_content || null,
                            tool_calls: (r.choices[0].message.tool_calls || []).map(oaiCall),
                            finish: r.choices[0].finish_reason, usage: r.usage });

(async () => {
  const out = {};
  const model = cfg.model;
  const client = new OpenAI({ baseURL: base, apiKey: 'none', fetch: rec, maxRetries: 0 });
  const g = { model, temperature: 0, seed: cfg.seed };

  out.oai_schema = await run('openai json_schema', async () => {
    const r = await client.chat.completions.create({ ...g, messages: cfg.ask, max_tokens: cfg.max,
      response_format: { type: 'json_schema', json_schema: { name: 'verdict', strict: true, schema: cfg.schema } } });
    const c = oaiChoice(r);
    let obj = null;
    try { obj = JSON.parse(c.content); } catch (e) { obj = { unparsed: c.content }; }
    return { ...c, object: obj };
  });

  out.oai_loop = await run('openai tool loop', async () => {
    const msgs = cfg.ask.slice();
    const r1 = await client.chat.completions.create({ ...g, ...cfg.steer, messages: msgs, tools: cfg.tools,
                                                      tool_choice: 'required', max_tokens: cfg.max });
    const m = r1.choices[0].message;
    msgs.push(m);
    for (const c of m.tool_calls || [])
      msgs.push({ role: 'tool', tool_call_id: c.id, content: result(c.function.name, c.function.arguments) });
    const r2 = await client.chat.completions.create({ ...g, messages: msgs, tools: cfg.tools, max_tokens: cfg.max2 });
    return { first: oaiChoice(r1), answer: oaiChoice(r2) };
  });

  // transformRequestBody (an option of createOpenAICompatible) steers the steps that must call a tool: the
  // random-weight model needs logit_bias to open and close a call (see oracle_clients_tools.py)
  const prov = createOpenAICompatible({ name: 'srv', baseURL: base, supportsStructuredOutputs: true,
                                        includeUsage: true, fetch: rec,
                                        transformRequestBody: (b) => b.tool_choice === 'required' ?
                                          { ...b, logit_bias: cfg.steer.logit_bias } : b });
  const ai = { model: prov.chatModel(model), temperature: 0, seed: cfg.seed, maxRetries: 0 };
  out.ai_object = await run('ai generateObject', async () => {
    const r = await generateObject({ ...ai, schema: jsonSchema(cfg.schema), schemaName: 'verdict',
                                     messages: cfg.ask, maxOutputTokens: cfg.max });
    return { object: r.object, finish: r.finishReason, usage: r.usage };
  });

  out.ai_tools = await run('ai generateText tools', async () => {
    const tools = {};
    for (const t of cfg.tools)
      tools[t.function.name] = tool({ description: t.function.description, inputSchema: jsonSchema(t.function.parameters),
                                      execute: async (args) => JSON.parse(result(t.function.name, JSON.stringify(args))) });
    const r = await generateText({ ...ai, temperature: cfg.steer.temperature, messages: cfg.ask, tools,
                                   toolChoice: 'required', maxOutputTokens: cfg.max, stopWhen: stepCountIs(2),
                                   prepareStep: ({ stepNumber }) => stepNumber > 0 ? { toolChoice: 'none' } : {} });
    return { steps: r.steps.map(s => ({ text: s.text, reasoning: s.reasoningText || null, finish: s.finishReason,
                                        usage: s.usage,
                                        calls: s.toolCalls.map(c => ({ name: c.toolName, input: c.input, id: c.toolCallId })),
                                        results: s.toolResults.map(x => ({ name: x.toolName, output: x.output })) })),
             text: r.text, finish: r.finishReason, usage: r.totalUsage };
  });

  const lc = new ChatOpenAI({ model, apiKey: 'none', temperature: 0, maxTokens: cfg.max, maxRetries: 0,
                              configuration: { baseURL: base, fetch: rec } });
  const lcMsg = (m) => ({ content: m.content, calls: (m.tool_calls || []).map(c => ({ name: c.name, args: c.args, id: c.id })),
                          finish: (m.response_metadata || {}).finish_reason || null,
                          usage: m.usage_metadata || null });
  out.lc_tools = await run('langchain bindTools', async () => {
    const human = new HumanMessage(cfg.ask[cfg.ask.length - 1].content);
    const steered = new ChatOpenAI({ model, apiKey: 'none', temperature: cfg.steer.temperature, maxTokens: cfg.max,
                                     maxRetries: 0, logitBias: cfg.steer.logit_bias,
                                     configuration: { baseURL: base, fetch: rec } });
    const m1 = await steered.bindTools(cfg.tools, { tool_choice: 'required', seed: cfg.seed }).invoke([human]);
    const back = [human, m1, ...(m1.tool_calls || []).map(c => new ToolMessage({ tool_call_id: c.id,
                                                                               content: result(c.name, JSON.stringify(c.args)) }))];
    const m2 = await lc.bindTools(cfg.tools).invoke(back, { max_tokens: cfg.max2 });
    return { first: lcMsg(m1), answer: lcMsg(m2) };
  });
  out.lc_structured = await run('langchain withStructuredOutput', async () => {
    const s = lc.withStructuredOutput(cfg.schema, { name: 'verdict', method: 'jsonSchema', includeRaw: true });
    const r = await s.invoke([new HumanMessage(cfg.ask[cfg.ask.length - 1].content)]);
    return { object: r.parsed, raw: lcMsg(r.raw) };
  });
  out.sent = sent;
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e && e.stack || e)); process.exit(1); });
