import { deny } from './deny.js';
import type { PathIntent } from './path-intent.js';

interface SedCommand {
  cmd: string;
  /** s flags. */
  flags?: string;
  /** r R w W, and s///w: the file. */
  file?: string;
}

/** Below high: these commands, one per script, and s flags from g p i I and digits. */
const SAFE_SED_COMMANDS = new Set(['s', 'y', 'p', 'd', '=', 'q']);
const SAFE_S_FLAGS = /^[gpiI0-9]*$/;

/**
 * sed scripts: at high, the whole script (GNU joins -e parts with newlines) is read for the files
 * it names; below high, each part must be one command from SAFE_SED_COMMANDS (no e, r, R, w, W).
 */
export function sedScriptIntent(scripts: string[], intent: PathIntent) {
  for (const c of parseSedScript(scripts.join('\n'))) {
    if (c.file === undefined) continue;
    (c.cmd === 'r' || c.cmd === 'R' ? intent.reads : intent.writes).push(c.file);
  }
  for (const script of scripts) {
    const why = lowSedProblem(script);
    if (why)
      intent.highOnly.push({
        rule: 'sed_script',
        message: `sed script ${JSON.stringify(script)}: ${why}; more is allowed at permission level high only`,
      });
  }
}

function lowSedProblem(script: string): string | undefined {
  if (/[;\n{}]/.test(script)) return 'one command only (";", newlines, "{" and "}" are not allowed)';
  let cmds: SedCommand[];
  try {
    cmds = parseSedScript(script);
  } catch {
    return 'it does not parse on its own';
  }
  if (cmds.length > 1) return 'one command only';
  const c = cmds[0];
  if (!c) return undefined;
  if (!SAFE_SED_COMMANDS.has(c.cmd)) return `command "${c.cmd}" is not allowed (only ${[...SAFE_SED_COMMANDS].join(' ')})`;
  if (c.file !== undefined || !SAFE_S_FLAGS.test(c.flags ?? ''))
    return `s flags "${c.flags ?? ''}${c.file !== undefined ? `w ${c.file}` : ''}" are not allowed (only g p i I and a number)`;
  return undefined;
}

// sed commands by what follows them: nothing; an optional number; a label (or version) up to
// ";" or the line's end; text, a file name, or a shell command up to the line's end.
const SED_BARE = '}=dDgGhHnNpPxzF';
const SED_NUMBER = 'lLqQ';
const SED_LABEL = ':btTv';
const SED_TEXT = 'aic';
const SED_FILE = 'rRwW';

/**
 * A sed script's commands, by the grammar GNU sed and busybox share. Throws sed_script where it
 * cannot be read with certainty: where the two could disagree on where a command ends (a
 * delimiter inside [...], ";" or "}" in a file name or text), the script is refused.
 */
function parseSedScript(script: string): SedCommand[] {
  const cmds: SedCommand[] = [];
  let i = 0;
  const fail = (why: string) => deny('sed_script', `sed script ${JSON.stringify(script)}: ${why}`);
  const at = () => script[i];
  const skip = (chars: string) => {
    while (i < script.length && chars.includes(script[i] as string)) i++;
  };
  const digits = () => {
    const start = i;
    while (/\d/.test(at() ?? '')) i++;
    return i > start;
  };
  /** A regex up to its unescaped delimiter (the delimiter is consumed). */
  const delimited = (delim: string, regex: boolean) => {
    for (; i < script.length; i++) {
      const c = script[i] as string;
      if (c === '\\') i++;
      else if (c === '\n') break;
      else if (c === delim) {
        i++;
        return;
      } else if (regex && c === '[') {
        const end = bracketEnd(script, i);
        if (end !== -1 && script.slice(i, end).includes(delim)) throw fail(`"${delim}" inside [...] (use another delimiter, as s|a/b|c|)`);
      }
    }
    throw fail('unterminated command');
  };
  const delimiter = () => {
    const d = script[i++];
    if (d === undefined || d === '\n' || d === '\\') throw fail('bad delimiter');
    return d;
  };
  const address = () => {
    const c = at();
    if (c === undefined) return false;
    if (/\d/.test(c)) {
      digits();
      if (at() === '~') {
        i++;
        digits();
      }
    } else if (c === '$') i++;
    else if (c === '/' || c === '\\') {
      i++;
      delimited(c === '/' ? '/' : delimiter(), true);
      skip('IM');
    } else return false;
    return true;
  };
  /** To the end of the line: a file name, a label, text. */
  const rest = (what: string, terminators = '\n') => {
    skip(' \t');
    const start = i;
    while (i < script.length && !terminators.includes(script[i] as string)) i++;
    const value = script.slice(start, i);
    if (/[;}]/.test(value)) throw fail(`";" or "}" in the ${what} "${value}" (sed implementations differ on where it ends)`);
    return value;
  };
  /** After a command: blanks, then the end, a newline, ";", "}" or a comment. */
  const end = () => {
    skip(' \t');
    const c = at();
    if (c === undefined || c === '}' || c === '#') return;
    if (c !== '\n' && c !== ';') throw fail(`unexpected "${c}" after a command`);
    i++;
  };
  for (;;) {
    skip(' \t\n;');
    if (i >= script.length) return cmds;
    if (at() === '#') {
      cmds.push({ cmd: '#' });
      rest('comment');
      continue;
    }
    if (address()) {
      skip(' \t');
      if (at() === ',') {
        i++;
        skip(' \t');
        if (at() === '+' || at() === '~') {
          i++;
          digits();
        } else if (!address()) throw fail('a second address is missing');
      }
    }
    skip(' \t');
    while (at() === '!') {
      i++;
      skip(' \t');
    }
    const cmd = script[i++];
    if (cmd === undefined) throw fail('a command is missing');
    if (cmd === '{') cmds.push({ cmd });
    else if (SED_BARE.includes(cmd) || SED_NUMBER.includes(cmd)) {
      if (SED_NUMBER.includes(cmd)) {
        skip(' \t');
        digits();
      }
      cmds.push({ cmd });
      end();
    } else if (SED_LABEL.includes(cmd)) {
      const label = rest('label', '\n;');
      if (/\s/.test(label) || (cmd === ':' && !label)) throw fail(`label "${label}"`);
      cmds.push({ cmd });
    } else if (SED_TEXT.includes(cmd)) {
      // "a text", or "a\" then the text on the next line; a trailing backslash continues it.
      skip(' \t');
      if (at() === '\\') {
        i++;
        skip(' \t');
        if (at() === '\n') i++;
      }
      const start = i;
      while (i < script.length && script[i] !== '\n') i += script[i] === '\\' ? 2 : 1;
      if (/[;}]/.test(script.slice(start, i))) throw fail(`";" or "}" in the text of "${cmd}"`);
      cmds.push({ cmd });
    } else if (SED_FILE.includes(cmd)) {
      const file = rest('file name');
      if (!file) throw fail(`"${cmd}" without a file`);
      cmds.push({ cmd, file });
    } else if (cmd === 'e') {
      rest('command');
      cmds.push({ cmd });
    } else if (cmd === 's' || cmd === 'y') {
      const d = delimiter();
      delimited(d, cmd === 's');
      delimited(d, false);
      let flags = '';
      while (cmd === 's' && /[gpiImMe0-9]/.test(at() ?? '')) flags += script[i++];
      if (cmd === 's' && at() === 'w') {
        i++;
        const file = rest('file name');
        if (!file) throw fail('"s///w" without a file');
        cmds.push({ cmd, flags, file });
      } else {
        cmds.push({ cmd, flags });
        end();
      }
    } else throw fail(`unknown command "${cmd}"`);
  }
}

/** The index after a bracket expression opening at i ("[]a]", "[^]a]", "[[:alpha:]]"), or -1 when it does not close. */
function bracketEnd(s: string, i: number): number {
  let j = i + 1;
  if (s[j] === '^') j++;
  if (s[j] === ']') j++;
  while (j < s.length) {
    const c = s[j] as string;
    if (c === '[' && ':.='.includes(s[j + 1] ?? ' ')) {
      const close = s.indexOf(`${s[j + 1]}]`, j + 2);
      if (close === -1) return -1;
      j = close + 2;
    } else if (c === ']') return j + 1;
    else j++;
  }
  return -1;
}
