import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';

/**
 * A fake of OpenAI's Responses API (`POST /v1/responses`, streaming SSE: response.created,
 * output_item.added, output_text.delta, output_item.done, response.completed with usage), as
 * Codex calls it. Answers "fake reply <n>"; records every request with headers and body.
 *
 * A prompt carrying "EXEC: <command>" is answered, as a model in Codex's code mode does, with a
 * call of the custom tool `exec` (its input: JavaScript that runs the command through
 * `tools.exec_command` and returns its output); once the call's output comes back
 * (`custom_tool_call_output`), with the text "ran: <output>".
 */
export interface RecordedResponsesCall {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: { model?: string; input?: Array<{ role?: string; content?: unknown }> } | undefined;
  rawBody: string;
}

export async function startFakeResponses(opts: { apiKey: string }) {
  const requests: RecordedResponsesCall[] = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c));
    req.on('end', () => {
      let body: RecordedResponsesCall['body'];
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      requests.push({ path: req.url ?? '', headers: req.headers, body, rawBody: raw });
      if (req.headers.authorization !== `Bearer ${opts.apiKey}`) {
        res.writeHead(401, { 'content-type': 'application/json' });
        return res.end(
          JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }),
        );
      }
      if (req.method !== 'POST' || !req.url?.startsWith('/v1/responses')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
      }
      n++;
      const id = `resp_${randomUUID().replace(/-/g, '')}`;
      const mid = `msg_${randomUUID().replace(/-/g, '')}`;
      const usage = {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13,
      };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const ev = (type: string, data: object) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      ev('response.created', { response: { id, object: 'response', status: 'in_progress', model: body?.model, output: [] } });
      const input = (body?.input ?? []) as Array<Record<string, unknown>>;
      const last = input.at(-1);
      const command = last?.type === 'custom_tool_call_output' ? undefined : /EXEC: (.+)/.exec(userText(last))?.[1];
      let item: Record<string, unknown>;
      if (command) {
        const source = `const r = await tools.exec_command({ cmd: ${JSON.stringify(command)}, login: false });\ntext(String(r.output));`;
        item = {
          type: 'custom_tool_call',
          id: `ctc_${randomUUID().replace(/-/g, '')}`,
          call_id: `call_${randomUUID().replace(/-/g, '')}`,
          name: 'exec',
          input: source,
          status: 'completed',
        };
        ev('response.output_item.added', { output_index: 0, item: { ...item, input: '', status: 'in_progress' } });
        ev('response.custom_tool_call_input.delta', { item_id: item.id, output_index: 0, delta: source });
        ev('response.custom_tool_call_input.done', { item_id: item.id, output_index: 0, input: source });
      } else {
        const output = last?.type === 'custom_tool_call_output' ? outputText(last.output) : undefined;
        const text = output !== undefined ? `ran: ${output.trim().slice(0, 500)}` : `fake reply ${n}`;
        item = {
          type: 'message',
          id: mid,
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text, annotations: [] }],
        };
        ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
        ev('response.output_text.delta', { item_id: mid, output_index: 0, content_index: 0, delta: text });
      }
      ev('response.output_item.done', { output_index: 0, item });
      ev('response.completed', { response: { id, object: 'response', status: 'completed', model: body?.model, output: [item], usage } });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The text of a user input item (a string, or input_text parts). */
function userText(item: Record<string, unknown> | undefined): string {
  if (!item || item.role !== 'user') return '';
  const content = item.content;
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((c: { text?: unknown }) => (typeof c.text === 'string' ? c.text : '')).join('\n') : '';
}

/** A tool call's output as Codex sends it back: a string, or content parts. */
function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  return Array.isArray(output) ? output.map((c: { text?: unknown }) => (typeof c.text === 'string' ? c.text : '')).join('\n') : '';
}
