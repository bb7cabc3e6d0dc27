import fs from 'node:fs';
import { join } from 'node:path';
import { RunRecordSchema, type RunRecord } from '../admin/views.js';
import { errnoOf } from '../errors.js';

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
  let text: string;
  try {
    text = fs.readFileSync(join(sessionsDir, FILE), 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return { records: [], corrupt: 0 };
    throw err;
  }
  const records: RunRecord[] = [];
  let corrupt = 0;
  const lines = text.split('\n').filter(Boolean);
  for (let i = lines.length - 1; i >= 0 && records.length < filter.limit; i--) {
    let parsed: ReturnType<typeof RunRecordSchema.safeParse>;
    try {
      parsed = RunRecordSchema.safeParse(JSON.parse(lines[i] as string));
    } catch {
      corrupt++;
      continue;
    }
    if (!parsed.success) {
      corrupt++;
      continue;
    }
    if (!filter.keep || filter.keep(parsed.data)) records.push(parsed.data);
  }
  return { records, corrupt };
}
