/**
 * Counts the tokens of a model answer as it streams past, without holding it: SSE `data:` lines
 * (Anthropic's message_start/message_delta, OpenAI's response.completed or a chat chunk's usage)
 * or, for a plain JSON answer, its `usage`. Unknown shapes count as 0, never as an error.
 */
export interface Usage {
  input: number;
  output: number;
  /** The answer said how many tokens it used (else the caller estimates). */
  known: boolean;
}

const MAX_LINE = 1024 * 1024;

export function usageTap(contentType: string | undefined, maxJsonBytes: number) {
  const sse = (contentType ?? '').includes('text/event-stream');
  const usage: Usage = { input: 0, output: 0, known: false };
  let pending = '';
  let json: Buffer[] = [];
  let jsonBytes = 0;

  const absorb = (obj: unknown) => {
    const u = usageOf(obj);
    if (!u) return;
    // Anthropic reports input at the start and a running output total at the end: keep the largest.
    usage.input = Math.max(usage.input, u.input);
    usage.output = Math.max(usage.output, u.output);
    usage.known = true;
  };

  return {
    push(chunk: Buffer) {
      if (!sse) {
        if (jsonBytes + chunk.length <= maxJsonBytes) json.push(chunk);
        jsonBytes += chunk.length;
        return;
      }
      pending += chunk.toString('utf8');
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl).trim();
        pending = pending.slice(nl + 1);
        if (line.startsWith('data:')) absorb(parseOrUndefined(line.slice(5)));
      }
      if (pending.length > MAX_LINE) pending = ''; // a line this long carries no usage worth the memory
    },
    result(): Usage {
      if (!sse && jsonBytes <= maxJsonBytes) absorb(parseOrUndefined(Buffer.concat(json).toString('utf8')));
      json = [];
      return usage;
    },
  };
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

function usageOf(obj: unknown): Omit<Usage, 'known'> | undefined {
  if (!isObject(obj)) return undefined;
  const holder = [
    obj.usage,
    isObject(obj.message) ? obj.message.usage : undefined,
    isObject(obj.response) ? obj.response.usage : undefined,
  ].find(isObject);
  if (!holder) return undefined;
  return {
    input:
      num(holder.input_tokens) + num(holder.cache_creation_input_tokens) + num(holder.cache_read_input_tokens) + num(holder.prompt_tokens),
    output: num(holder.output_tokens) + num(holder.completion_tokens),
  };
}
