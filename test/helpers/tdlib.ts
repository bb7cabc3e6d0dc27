import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * TDLib, Telegram's own client library, loaded from the cache scripts/ensure-tdlib.sh fills (make
 * test runs it): tdl's `execute` runs TDLib's synchronous functions in process, with no account,
 * no client and no network. `parseTextEntities` with MarkdownV2 is the parser the official Bot API
 * server applies to `parse_mode: "MarkdownV2"`.
 */

const ROOT = join(import.meta.dirname, '..', '..');

/** An entity as TDLib returns it (offsets and lengths in UTF-16 units). */
export interface TdEntity {
  offset: number;
  length: number;
  type: { _: string; language?: string };
}
export type TdParsed = { ok: true; text: string; entities: TdEntity[] } | { ok: false; code: number; message: string };

export interface Tdlib {
  /** TDLib's own version ("1.8.65"). */
  version: string;
  parseMarkdownV2(text: string): TdParsed;
}

interface Tdl {
  configure(options: { tdjson: string; verbosityLevel: number }): void;
  execute(request: Record<string, unknown>): Record<string, unknown>;
}

/** The cache directory, asked of the script itself (one place knows the versions); a missing cache fails, naming the fix. */
export function tdlibDir(): string {
  const dir = execFileSync(join(ROOT, 'scripts', 'ensure-tdlib.sh'), ['--where'], { encoding: 'utf8' }).trim();
  if (!fs.existsSync(join(dir, 'ok')))
    throw new Error(`TDLib is not in its cache (${dir}). Run scripts/ensure-tdlib.sh (make test does) to fetch it from npm.`);
  return dir;
}

export function loadTdlib(dir = tdlibDir()): Tdlib {
  const load = createRequire(join(dir, 'node_modules', 'index.js'));
  const tdl = load('tdl') as Tdl;
  const { getTdjson } = load('prebuilt-tdlib') as { getTdjson(): string };
  tdl.configure({ tdjson: getTdjson(), verbosityLevel: 0 });
  const version = tdl.execute({ _: 'getOption', name: 'version' });
  if (version._ !== 'optionValueString') throw new Error(`TDLib did not say its version: ${JSON.stringify(version)}`);
  return {
    version: String(version.value),
    parseMarkdownV2(text) {
      const r = tdl.execute({ _: 'parseTextEntities', text, parse_mode: { _: 'textParseModeMarkdown', version: 2 } });
      if (r._ === 'formattedText') return { ok: true, text: r.text as string, entities: r.entities as TdEntity[] };
      return { ok: false, code: Number(r.code), message: String(r.message) };
    },
  };
}
