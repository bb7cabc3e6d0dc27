import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake of OpenAI's speech-to-text endpoint, `POST /v1/audio/transcriptions`, as its API
 * reference describes it: a multipart/form-data body (parsed here by undici's own FormData
 * parser, as a server's framework would) with `file`, `model`, optional `language`, `prompt`,
 * `response_format` (json: `{text, usage}`, text: the bare text, verbose_json: with `duration`),
 * the key as `Authorization: Bearer`, and errors as OpenAI returns them: `{error: {message, type,
 * param, code}}` (401 invalid_api_key, 400 for a missing field or a format it does not take, 404
 * model_not_found, 413 past 25 MB, 429 rate_limit_exceeded).
 *
 * Usage follows the model: whisper-1 bills by duration (`{type: "duration", seconds}`), the
 * gpt-4o transcribe models by tokens (`{type: "tokens", input_tokens, output_tokens, total_tokens}`).
 *
 * What the "audio" says: a test builds it with `speech(text, seconds)` (an Ogg page header, then
 * "SECONDS:<n>" and "SPEECH:<text>"); the fake hears the text after SPEECH: and that length.
 */
export interface TranscriptionRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  fields: Record<string, string>;
  file?: { name: string; type: string; size: number };
}

const FORMATS = ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm'];
const MODELS = ['whisper-1', 'gpt-4o-transcribe', 'gpt-4o-mini-transcribe'];
const MAX_BYTES = 25 * 1024 * 1024;

/** A voice note's bytes that the fake hears as `text`, `seconds` long. */
export function speech(text: string, seconds = 3): Buffer {
  return Buffer.concat([Buffer.from('OggS\0\x02'), Buffer.alloc(20), Buffer.from(`SECONDS:${seconds}\nSPEECH:${text}`)]);
}

export interface FakeTranscriptions {
  url: string;
  requests: TranscriptionRequest[];
  /** The next request gets this error (as OpenAI words it) instead of an answer. */
  failNext(status: number, error: { message: string; type: string; code?: string | null }): void;
  /** Answers wait this long before they come (0: at once). */
  setDelay(ms: number): void;
  /** Requests being answered now, and the most there ever were at once. */
  inFlight(): { now: number; most: number };
  close(): Promise<void>;
}

export async function startFakeTranscriptions(opts: { apiKey: string }): Promise<FakeTranscriptions> {
  const requests: TranscriptionRequest[] = [];
  let failure: { status: number; error: { message: string; type: string; code?: string | null } } | undefined;
  let delayMs = 0;
  let now = 0;
  let most = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const answer = (status: number, body: unknown, type = 'application/json') => {
      if (res.headersSent) return;
      res.writeHead(status, { 'content-type': type });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    const error = (
      status: number,
      message: string,
      type = 'invalid_request_error',
      code: string | null = null,
      param: string | null = null,
    ) => answer(status, { error: { message, type, param, code } });
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BYTES + 1024 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      now++;
      most = Math.max(most, now);
      const done = () => now--;
      res.once('close', done);
      void handle().catch((err: unknown) => error(500, `fake: ${String(err)}`, 'server_error'));
      async function handle() {
        const auth = req.headers.authorization;
        const record: TranscriptionRequest = { path: req.url ?? '', headers: req.headers, fields: {} };
        requests.push(record);
        if (!auth?.startsWith('Bearer '))
          return error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.",
          );
        if (auth !== `Bearer ${opts.apiKey}`)
          return error(
            401,
            `Incorrect API key provided: ${auth.slice(7, 10)}***. You can find your API key at https://platform.openai.com/account/api-keys.`,
            'invalid_request_error',
            'invalid_api_key',
          );
        if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') return error(404, `Invalid URL (${req.method} ${req.url})`);
        if (size > MAX_BYTES) return error(413, `Maximum content size limit (${MAX_BYTES}) exceeded (${size} bytes read)`, 'server_error');
        const type = req.headers['content-type'] ?? '';
        if (!type.startsWith('multipart/form-data'))
          return error(
            400,
            "Invalid Content-Type header (application/json), expected multipart/form-data. (HINT: If you're using curl, you can pass -H 'Content-Type: multipart/form-data')",
          );
        let form: FormData;
        try {
          form = await new Request('http://fake/', {
            method: 'POST',
            headers: { 'content-type': type },
            body: Buffer.concat(chunks),
          }).formData();
        } catch {
          return error(400, 'Could not parse multipart form');
        }
        let file: File | undefined;
        for (const [name, value] of form.entries()) {
          if (typeof value === 'string') record.fields[name] = value;
          else if (name === 'file') file = value;
        }
        if (file) record.file = { name: file.name, type: file.type, size: file.size };
        if (failure) {
          const f = failure;
          failure = undefined;
          return answer(f.status, { error: { param: null, code: null, ...f.error } });
        }
        if (!file)
          return error(
            400,
            '1 validation error for Request\nbody -> file\n  field required (type=value_error.missing)',
            'invalid_request_error',
            null,
            'file',
          );
        const model = record.fields.model;
        if (!model)
          return error(
            400,
            '1 validation error for Request\nbody -> model\n  field required (type=value_error.missing)',
            'invalid_request_error',
            null,
            'model',
          );
        if (!MODELS.includes(model))
          return error(
            404,
            `The model \`${model}\` does not exist or you do not have access to it.`,
            'invalid_request_error',
            'model_not_found',
          );
        const ext = file.name.split('.').pop()?.toLowerCase() ?? '';
        if (!file.name.includes('.') || !FORMATS.includes(ext))
          return error(400, `Invalid file format. Supported formats: ${JSON.stringify(FORMATS)}`, 'invalid_request_error', null, 'file');
        const bytes = Buffer.from(await file.arrayBuffer()).toString('utf8');
        const text = /SPEECH:([\s\S]*)$/.exec(bytes)?.[1] ?? '';
        const seconds = Number(/SECONDS:(\d+(?:\.\d+)?)/.exec(bytes)?.[1] ?? '1');
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
        const usage =
          model === 'whisper-1'
            ? { type: 'duration', seconds: Math.ceil(seconds) }
            : {
                type: 'tokens',
                input_tokens: Math.ceil(seconds * 10),
                input_token_details: { text_tokens: 0, audio_tokens: Math.ceil(seconds * 10) },
                output_tokens: Math.ceil(text.length / 4),
                total_tokens: Math.ceil(seconds * 10) + Math.ceil(text.length / 4),
              };
        const format = record.fields.response_format ?? 'json';
        if (format === 'text') return answer(200, `${text}\n`, 'text/plain; charset=utf-8');
        if (format === 'verbose_json')
          return answer(200, {
            task: 'transcribe',
            language: record.fields.language ?? 'english',
            duration: seconds,
            text,
            segments: [],
            usage,
          });
        if (format !== 'json') return error(400, `Invalid response_format: ${format}`, 'invalid_request_error', null, 'response_format');
        return answer(200, { text, usage });
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    failNext: (status, error) => void (failure = { status, error }),
    setDelay: (ms) => void (delayMs = ms),
    inFlight: () => ({ now, most }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
