import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { OUTBOUND_LOG_BYTES } from '../config/bounds.js';

/**
 * Every call a container made through berth: model calls (with tokens) and egress decisions.
 * One JSON line each in sessions/outbound.jsonl (berth-owned, hidden from containers). Never
 * the key, never a prompt or a response body.
 */
const Common = {
  at: z.string(),
  run: z.string(),
  tenant: z.string(),
  session: z.string(),
  status: z.number().int().describe('The HTTP status the container got (403: refused by berth).'),
  reason: z.string().optional().describe('Why berth refused it, or what failed.'),
};

export const ModelCallSchema = z.object({
  ...Common,
  kind: z.literal('model'),
  upstream: z.string(),
  model: z.string().optional(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  ms: z.number(),
});

export const EgressCallSchema = z.object({
  ...Common,
  kind: z.literal('egress'),
  host: z.string(),
  port: z.number().int(),
  method: z.string(),
  path: z.string().optional().describe('The request path (no query), for requests a brokered secret went into or was refused for.'),
  secret: z.string().optional().describe('The brokered secrets the request carried (names, comma-separated), or the one it was refused.'),
});

export const OutboundRecordSchema = z.discriminatedUnion('kind', [ModelCallSchema, EgressCallSchema]);
export type OutboundRecord = z.infer<typeof OutboundRecordSchema>;
export type ModelCall = z.infer<typeof ModelCallSchema>;

const FILE = 'outbound.jsonl';

export function appendOutbound(sessionsDir: string, record: OutboundRecord): void {
  fs.mkdirSync(sessionsDir, { recursive: true, mode: 0o700 });
  const file = join(sessionsDir, FILE);
  // A tenant decides how many lines this gets (every refused request is one): past the bound the
  // file is rotated, one older file kept, so it never grows past twice the bound.
  if ((fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0) > OUTBOUND_LOG_BYTES) fs.renameSync(file, `${file}.1`);
  fs.appendFileSync(file, `${JSON.stringify(record)}\n`, { mode: 0o600 });
}

/** Newest first, at most `limit`; corrupt lines are skipped. */
export function readOutbound(
  sessionsDir: string,
  filter: { since?: string; keep?: (r: OutboundRecord) => boolean; limit: number },
): OutboundRecord[] {
  const out: OutboundRecord[] = [];
  const lines = readJsonLines(join(sessionsDir, FILE));
  for (let i = lines.length - 1; i >= 0 && out.length < filter.limit; i--) {
    const record = parseJsonLine(lines[i] as string, OutboundRecordSchema);
    if (!record) continue;
    if (filter.since && record.at < filter.since) break; // appended in time order
    if (!filter.keep || filter.keep(record)) out.push(record);
  }
  return out;
}
