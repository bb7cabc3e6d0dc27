import { posix } from 'node:path';
import { has, type Parsed, parseOptions, valuesOf } from './argv.js';
import type { ValueKind } from './bins.js';
import { deny, notAllowed } from './deny.js';
import { findIntent } from './find-expr.js';
import { execOnly, type PathIntent } from './path-intent.js';
import { sedScriptIntent } from './sed-script.js';
import { type CompiledTable, TABLE } from './table.js';
import { testIntent } from './test-expr.js';

/** A path as seen from dir; absolute paths stay as they are. */
const relativeTo = (dir: string, path: string) => (path.startsWith('/') ? path : posix.join(dir, path));

/** Which paths a command reads and writes, what it runs, and which of its forms need level high. Throws on what the table refuses. */
export function collectPathIntent(argv: string[]): PathIntent {
  const [bin = '', ...args] = argv;
  const intent: PathIntent = { reads: [], writes: [], highOnly: [], runs: [] };
  const spec = TABLE.get(bin);
  if (!spec) {
    // Outside the table (level high only): path-like arguments count as reads; writes are the container's to bound.
    intent.reads = args.filter((a) => !a.startsWith('-') && (a.startsWith('/') || a.startsWith('..') || a.includes('/../')));
    return intent;
  }
  if ('grammar' in spec) {
    if (spec.grammar === 'find') findIntent(args, intent);
    if (spec.grammar === 'test') testIntent(args, intent);
    return intent; // words: echo, true, false print or ignore them
  }
  const parsed = parseOptions(bin, spec, args);
  for (const o of parsed.options) {
    if (o.def.highOnly) intent.highOnly.push(execOnly(`"${bin} ${o.name}"`));
    if (o.value !== undefined && o.def.value) valuePaths(bin, o.def.value, o.value, intent);
  }
  operandPaths(bin, spec, parsed, intent);
  return intent;
}

const URL_SCHEMES = /^(https?|ftps?):\/\//i;

function checkUrl(bin: string, url: string) {
  // file:, scp:, dict:, smb: and friends read, write or reach beyond the web; a scheme-less word would be guessed at.
  if (!URL_SCHEMES.test(url)) throw deny('url_not_allowed', `"${bin}" fetches http(s):// and ftp(s):// URLs only, not "${url}"`);
}

/** The paths in one option value. Kinds that depend on the whole command (chdir, archive, scripts) are read by operandPaths. */
function valuePaths(bin: string, kind: ValueKind, v: string, intent: PathIntent) {
  const { reads, writes } = intent;
  switch (kind) {
    case 'read':
    case 'pattern-file':
    case 'script-file':
    case 'reference':
      reads.push(v);
      return;
    case 'write':
    case 'target':
      writes.push(v);
      return;
    case 'output':
      // curl -o "#1" names the file after a part of a globbed URL: "{../../tmp/x}".
      if (/#\d/.test(v)) throw notAllowed(bin, `output name "${v}" (#N takes text from the URL)`);
      writes.push(v);
      return;
    case 'in-place':
      // A suffix with "/" puts the backup in another directory.
      if (v.includes('/')) throw notAllowed(bin, `backup suffix "${v}"`);
      return;
    case 'at-file':
      if (v.startsWith('@')) reads.push(v.slice(1));
      return;
    case 'cookie':
      if (!v.includes('=')) reads.push(v); // no "=": a cookie file
      return;
    case 'urlencode': {
      // "name=content" is text; "@file" and "name@file" read the file.
      const at = v.indexOf('@');
      const eq = v.indexOf('=');
      if (at !== -1 && (eq === -1 || at < eq)) reads.push(v.slice(at + 1));
      return;
    }
    case 'form': {
      // name=@file or name=<file reads it; ";type=", ";headers=@file" and quoting are refused rather than followed.
      const content = v.slice(v.indexOf('=') + 1);
      if (/^[@<]/.test(content)) {
        if (/[;,"]/.test(content)) throw notAllowed(bin, `form field "${v}"`);
        reads.push(content.slice(1));
      } else if (content.includes(';')) throw notAllowed(bin, `form field "${v}"`);
      return;
    }
    case 'write-out':
      if (v.startsWith('@')) reads.push(v.slice(1));
      // %output{file} and %output{>>file} (curl 8.3) write to a file.
      for (const m of v.matchAll(/%output\{(?:>>)?([^}]*)\}/g)) writes.push(m[1] as string);
      return;
    case 'url':
      checkUrl(bin, v);
      return;
    default:
      return; // text, pattern, script, chdir, archive
  }
}

function operandPaths(bin: string, t: CompiledTable, parsed: Parsed, intent: PathIntent) {
  const { reads, writes } = intent;
  const ops = parsed.operands;
  const extraOperand = (op: string) => deny('operand_not_allowed', `"${bin}" takes no operand "${op}" here`);
  switch (t.operands) {
    case 'read':
      reads.push(...ops);
      return;
    case 'write':
      writes.push(...ops);
      return;
    case 'read-write':
      reads.push(...ops);
      if (!has(parsed, 'stdout')) writes.push(...ops);
      return;
    case 'text':
      return;
    case 'none':
      if (ops[0] !== undefined) throw extraOperand(ops[0]);
      return;
    case 'last-write':
    case 'link': {
      const targets = valuesOf(parsed, 'target');
      const sources = targets.length || ops.length < 2 ? ops : ops.slice(0, -1);
      const dest = targets.length ? targets : ops.length < 2 ? ['.'] : ops.slice(-1);
      if (!targets.length) writes.push(...dest); // -t DIR: written already, as an option value
      // A symlink's target is relative to where the link is (DEST, or the directory DEST is in), unless ln -r.
      const fromLink = t.operands === 'link' && has(parsed, 'symbolic') && !has(parsed, 'relative');
      const bases = fromLink ? dest.flatMap((d) => [d, posix.dirname(d)]) : ['.'];
      reads.push(...bases.flatMap((base) => sources.map((src) => relativeTo(base, src))));
      return;
    }
    case 'pattern-then-read':
      reads.push(...(has(parsed, 'pattern') || has(parsed, 'pattern-file') ? ops : ops.slice(1)));
      return;
    case 'mode-then-write':
      writes.push(...(has(parsed, 'reference') ? ops : ops.slice(1)));
      return;
    case 'in-out':
      if (ops[2] !== undefined) throw extraOperand(ops[2]);
      reads.push(...ops.slice(0, 1));
      writes.push(...ops.slice(1));
      return;
    case 'url':
      for (const u of ops) checkUrl(bin, u);
      return;
    case 'script-then-read': {
      const scripts = valuesOf(parsed, 'script');
      const files = scripts.length || has(parsed, 'script-file') ? ops : ops.slice(1);
      if (!scripts.length && !has(parsed, 'script-file')) {
        if (ops[0] === undefined) throw notAllowed(bin, 'without a script');
        scripts.push(ops[0]);
      }
      sedScriptIntent(scripts, intent);
      reads.push(...files);
      if (has(parsed, 'in-place')) writes.push(...files);
      return;
    }
    case 'tar':
      tarIntent(bin, parsed, intent);
      return;
    case 'command': {
      // env [NAME=VALUE]... [COMMAND [ARG]...]: a command, or a changed environment, needs high.
      const firstCommand = ops.findIndex((o) => !o.includes('=') && o !== '-');
      if (ops.length) intent.highOnly.push(execOnly(`"env ${ops.join(' ')}"`));
      if (firstCommand !== -1) intent.runs.push({ argv: ops.slice(firstCommand), cwd: valuesOf(parsed, 'chdir').at(-1) });
      return;
    }
    case 'date':
      for (const op of ops) if (!op.startsWith('+')) intent.highOnly.push(execOnly(`"date ${op}" (it sets the clock)`));
      return;
    case 'hostname':
      for (const op of ops) intent.highOnly.push(execOnly(`"hostname ${op}" (it sets the hostname)`));
      return;
  }
}

/**
 * tar by its mode: -c reads the operands (relative to -C) and writes the archive; -x reads the
 * archive and writes into -C (the operands are member names); -t reads the archive.
 */
function tarIntent(bin: string, parsed: Parsed, intent: PathIntent) {
  const modes = (['create', 'extract', 'list'] as const).filter((m) => has(parsed, m));
  if (modes.length !== 1) throw notAllowed(bin, 'without exactly one of -c, -x, -t');
  const mode = modes[0];
  // GNU tar applies -C to the operands after it, each relative to the one before: one -C keeps that knowable.
  const dirs = valuesOf(parsed, 'chdir');
  if (dirs.length > 1) throw notAllowed(bin, 'option "-C" more than once');
  const dir = dirs[0] ?? '.';
  for (const archive of valuesOf(parsed, 'archive')) {
    // GNU tar takes HOST:FILE for a remote archive and runs rsh to reach it.
    if (archive.includes(':') && !parsed.options.some((o) => o.name === '--force-local')) {
      intent.highOnly.push(execOnly(`"tar -f ${archive}" (HOST:FILE runs a remote shell)`));
    }
    (mode === 'create' ? intent.writes : intent.reads).push(archive);
  }
  if (mode === 'create') {
    if (dirs.length) intent.reads.push(dir);
    // "@other.tar" appends another archive's members.
    intent.reads.push(...parsed.operands.map((op) => relativeTo(dir, op.startsWith('@') ? op.slice(1) : op)));
  } else if (mode === 'extract' && !has(parsed, 'stdout')) intent.writes.push(dir);
}
