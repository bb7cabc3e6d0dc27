import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { PermissionLevelSchema } from '../config/session.js';
import { ReceiptSchema } from '../plan/receipt.js';
import { parseJsonLine, visitLinesNewestFirst } from '../fs/json-file.js';

/** The most steps a run keeps (its record, a transcript's reply); more are counted, not kept. */
export const RUN_STEPS_MAX = 200;

/** What a record keeps of a run's texts (the log is read often: bounded, the full output went to its caller). */
export const RECORD_TEXT_CHARS = { message: 2000, answer: 4000, stderr: 2000 };

/** One of a run's tool calls, as kept in its record. */
export const RunStepSchema = z.object({
  tool: z.string(),
  detail: z.string(),
  state: z.enum(['running', 'ok', 'failed', 'ended']),
  ms: z.number().optional(),
});

export type RunStep = z.infer<typeof RunStepSchema>;

/** One line of the run log: a run's record (every surface shows these). */
export const RunRecordSchema = z.object({
  run: z.string(),
  kind: z.enum(['message', 'shell_run']),
  session: z.string(),
  workspace: z.string(),
  permission_level: PermissionLevelSchema,
  runtime: z.string().optional().describe('The OCI runtime it ran under (runc, runsc, ...); absent in records of an older berth.'),
  workspace_root: z.string().describe('The host directory mounted as the workspace.'),
  exit_code: z.number().int(),
  timed_out: z.boolean(),
  truncated: z.boolean(),
  output_bytes: z.number().int(),
  timings_ms: z.object({ create: z.number(), start: z.number(), run: z.number(), total: z.number() }),
  finished_at: z.string(),
  steps: z
    .array(RunStepSchema)
    .max(RUN_STEPS_MAX)
    .optional()
    .describe(
      "The agent's tool calls as berth read them from its output (Claude Code, Codex; the shell when watched), in order; absent when its output has no steps.",
    ),
  more_steps: z.number().int().optional().describe('Steps past the ones kept.'),
  files_in: z
    .array(z.object({ path: z.string().max(1024), size: z.number().int() }))
    .max(100)
    .optional()
    .describe("What landed in the workspace's inbox/ for this message (paths and sizes, never the bytes)."),
  schedule: z
    .string()
    .optional()
    .describe('The schedule (berth schedule list) this run was a firing of; absent for a run someone asked for.'),
  receipt: ReceiptSchema.optional().describe(
    "What was planned for the run's container and observed of it at its start (docs/receipts.md); absent in records of an older berth.",
  ),
  receipt_digest: z.string().optional().describe("The receipt's sha256, as the audit log's run_receipt line holds it."),
  tenant: z
    .string()
    .optional()
    .describe('The tenant key it ran for (its channel is the part before ":"); absent in records of an older berth.'),
  message: z
    .string()
    .max(RECORD_TEXT_CHARS.message + 1)
    .optional()
    .describe("The message (or shell tool's command) it ran, cut at 2000 characters (…)."),
  answer: z
    .string()
    .max(RECORD_TEXT_CHARS.answer + 1)
    .optional()
    .describe('Its stdout (the answer), cut at 4000 characters (…).'),
  stderr: z
    .string()
    .max(RECORD_TEXT_CHARS.stderr + 1)
    .optional()
    .describe('The end of its stderr, 2000 characters at most (… before).'),
  warnings: z
    .array(z.string().max(500))
    .max(20)
    .optional()
    .describe('Why it was stopped or its container lost, and what the plan warned of.'),
});
export type RunRecord = z.infer<typeof RunRecordSchema>;

/** The project's run log: one JSON line per run, in sessions/ (berth-owned, hidden from containers). */
const FILE = 'runs.jsonl';

export function appendRunRecord(sessionsDir: string, record: RunRecord): void {
  // One write of one line with O_APPEND: concurrent runs never interleave inside a line.
  fs.appendFileSync(join(sessionsDir, FILE), `${JSON.stringify(record)}\n`, { mode: 0o600 });
}

/** Newest first; a corrupt line (a crash mid-write) is skipped and counted, never fatal. */
export function readRunRecords(
  sessionsDir: string,
  filter: { keep?: (record: RunRecord) => boolean; limit: number },
): { records: RunRecord[]; corrupt: number } {
  const records: RunRecord[] = [];
  let corrupt = 0;
  if (filter.limit <= 0) return { records, corrupt };
  visitLinesNewestFirst(join(sessionsDir, FILE), (line) => {
    const record = parseJsonLine(line, RunRecordSchema);
    if (!record) corrupt++;
    else if (!filter.keep || filter.keep(record)) records.push(record);
    return records.length < filter.limit;
  });
  return { records, corrupt };
}
