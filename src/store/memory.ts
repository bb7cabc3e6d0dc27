import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { PermissionLevel } from '../config/session.js';
import { parseJsonLine, readJsonLines } from '../fs/json-file.js';
import { LEVEL_PROFILES } from '../plan/levels.js';
import { deny } from '../plan/shell/index.js';

/**
 * A project's long-term memory: entries in projects/<name>/memory/entries.jsonl (berth-owned:
 * hidden in shared mode, mounted read-only at /memory for levels that may read it). Every
 * function checks the caller's level itself — the second gate after the tool policy — so a
 * new caller cannot skip it.
 */

export const MemoryEntrySchema = z.object({
  id: z.string(),
  text: z.string(),
  tags: z.array(z.string()),
  author: z.string().describe('Opaque id of the tenant that wrote it (stable per tenant; never its tenant key).'),
  created_at: z.string(),
});
export type MemoryEntry = z.infer<typeof MemoryEntrySchema>;

export const MemoryWriteSchema = z
  .object({
    text: z.string().min(1).max(8000).describe('What to remember.'),
    tags: z.array(z.string().min(1).max(64)).max(16).default([]).describe('Words to find it by later.'),
  })
  .strict();
export const MemorySearchSchema = z
  .object({
    query: z.string().min(1).max(500).describe('Words to look for; entries are ranked by matches.'),
    limit: z.number().int().min(1).max(20).default(5).describe('How many entries at most.'),
  })
  .strict();

export const MEMORY_FILE = 'entries.jsonl';
const MAX_TEXT_RETURNED = 2000;

export const MEMORY_SOP = `## Long-term memory
This project keeps long-term memory shared by its sessions. Read it with the memory_search tool
(or the files under /memory). Write only durable, useful facts, and only when your permission
level allows memory_write. Never store secrets.`;

function readAll(memoryDir: string): MemoryEntry[] {
  return readJsonLines(join(memoryDir, MEMORY_FILE)).flatMap((line) => parseJsonLine(line, MemoryEntrySchema) ?? []);
}

const words = (s: string) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

export function memoryWrite(
  memoryDir: string,
  level: PermissionLevel,
  author: string,
  input: z.input<typeof MemoryWriteSchema>,
): MemoryEntry {
  if (!LEVEL_PROFILES[level].memoryWrite) throw deny('memory_write_denied', `memory_write is not allowed at permission level ${level}`);
  const { text, tags } = MemoryWriteSchema.parse(input);
  const entry: MemoryEntry = {
    id: `m${Date.now().toString(36)}${randomBytes(3).toString('hex')}`,
    text,
    tags,
    author,
    created_at: new Date().toISOString(),
  };
  fs.mkdirSync(memoryDir, { recursive: true, mode: 0o755 });
  fs.appendFileSync(join(memoryDir, MEMORY_FILE), `${JSON.stringify(entry)}\n`, { mode: 0o644 });
  return entry;
}

export function memorySearch(memoryDir: string, level: PermissionLevel, input: z.input<typeof MemorySearchSchema>): MemoryEntry[] {
  if (!LEVEL_PROFILES[level].memoryRead) throw deny('memory_read_denied', `memory_search is not allowed at permission level ${level}`);
  const { query, limit } = MemorySearchSchema.parse(input);
  const terms = new Set(words(query));
  return readAll(memoryDir)
    .map((entry, order) => {
      const hay = [...words(entry.text), ...entry.tags.flatMap(words)];
      const score = hay.filter((w) => terms.has(w)).length;
      return { entry, score, order };
    })
    .filter((r) => r.score > 0)
    .sort((a, b) => b.score - a.score || b.order - a.order)
    .slice(0, limit)
    .map(({ entry }) => ({ ...entry, text: entry.text.slice(0, MAX_TEXT_RETURNED) }));
}

/** SOP + newest entries for a session's first prompt, bounded by count and characters; none below medium. */
export function memoryBootstrap(memoryDir: string, level: PermissionLevel, bounds = { entries: 5, chars: 4000 }): string | undefined {
  if (!LEVEL_PROFILES[level].memoryBootstrap) return undefined;
  let budget = bounds.chars;
  const lines: string[] = [];
  for (const e of readAll(memoryDir).reverse().slice(0, bounds.entries)) {
    const line = `- ${e.text.replace(/\s+/g, ' ')}${e.tags.length ? ` [${e.tags.join(', ')}]` : ''}`;
    if (line.length > budget) break;
    budget -= line.length;
    lines.push(line);
  }
  return `${MEMORY_SOP}\n\n### Remembered\n${lines.length ? lines.join('\n') : '(nothing yet)'}\n`;
}
