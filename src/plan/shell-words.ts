/**
 * Words of a shell message, read as a POSIX shell reads them but never expanded (plan/shell-source.ts):
 * quotes, backslashes, `$…` expansions and command substitutions are followed to find where a
 * word ends and whether anything in it expands; here-document bodies are skipped. One pass,
 * never backwards: a quote left open ends the message.
 */

export interface ShellWord {
  /** The source text. */
  text: string;
  /** The value when nothing in it expands (quotes removed); undefined otherwise. */
  plain: string | undefined;
}

export const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
/** `[` and `[[` as a command's name (test) are plain; elsewhere `[` starts a glob. */
const TEST_BRACKET = /\[\[?(?=[\s;&|]|$)/y;

export class ShellScanner {
  i = 0;
  /** Here-documents whose bodies start after the next newline: their delimiters. */
  private heredocs: Array<{ delimiter: string; tabs: boolean }> = [];

  constructor(readonly src: string) {}

  /** Reads the word at the cursor (the cursor past it). */
  readWord(): ShellWord {
    const { src } = this;
    const start = this.i;
    let plain: string | undefined = '';
    const add = (s: string) => {
      if (plain !== undefined) plain += s;
    };
    while (this.i < src.length) {
      const c = src[this.i]!;
      if (c === ' ' || c === '\t' || c === '\n' || ';&|<>()'.includes(c)) break;
      if (c === '\\') {
        if (src[this.i + 1] !== '\n') add(src[this.i + 1] ?? '');
        this.i += 2;
      } else if (c === "'") {
        const close = src.indexOf("'", this.i + 1);
        const end = close < 0 ? src.length : close;
        add(src.slice(this.i + 1, end));
        this.i = end + 1;
      } else if (c === '"') {
        this.i++;
        while (this.i < src.length && src[this.i] !== '"') {
          if (src[this.i] === '\\') {
            add(src[this.i + 1] ?? '');
            this.i += 2;
          } else if (src[this.i] === '$' || src[this.i] === '`') {
            plain = undefined;
            this.skipExpansion();
          } else add(src[this.i++]!);
        }
        this.i++;
      } else if (c === '$' || c === '`') {
        plain = undefined;
        this.skipExpansion();
      } else {
        TEST_BRACKET.lastIndex = this.i;
        if ('*?~'.includes(c) || (c === '[' && !TEST_BRACKET.test(src))) plain = undefined;
        add(c);
        this.i++;
      }
    }
    return { text: src.slice(start, Math.min(this.i, src.length)), plain };
  }

  /** Past a `$…`, `${…}`, `$(…)`, `$((…))` or a backquoted command (single quotes inside followed). */
  private skipExpansion() {
    const { src } = this;
    if (src[this.i] === '`') {
      const close = src.indexOf('`', this.i + 1);
      this.i = close < 0 ? src.length : close + 1;
      return;
    }
    this.i++; // the $
    const open = src[this.i];
    if (open !== '(' && open !== '{') {
      while (this.i < src.length && /[A-Za-z0-9_?#@*!$-]/.test(src[this.i]!)) {
        const special = !/[A-Za-z_]/.test(src[this.i]!);
        this.i++;
        if (special) break;
      }
      return;
    }
    const close = open === '(' ? ')' : '}';
    let depth = 0;
    while (this.i < src.length) {
      const c = src[this.i]!;
      if (c === "'") {
        const q = src.indexOf("'", this.i + 1);
        this.i = q < 0 ? src.length : q + 1;
        continue;
      }
      if (c === '\\') this.i++;
      else if (c === open) depth++;
      else if (c === close && --depth === 0) {
        this.i++;
        return;
      }
      this.i++;
    }
  }

  /** A here-document (`<<EOF`, `<<-EOF`) whose body follows the line. */
  heredoc(delimiter: ShellWord, tabs: boolean) {
    this.heredocs.push({ delimiter: delimiter.plain ?? delimiter.text.replace(/["'\\]/g, ''), tabs });
  }

  /** After a newline: the here-documents' bodies, up to their delimiters, skipped. */
  skipHeredocs() {
    const { src } = this;
    for (const h of this.heredocs) {
      for (;;) {
        if (this.i >= src.length) return;
        const nl = src.indexOf('\n', this.i);
        const end = nl < 0 ? src.length : nl;
        const line = src.slice(this.i, end);
        this.i = end + 1;
        if ((h.tabs ? line.replace(/^\t+/, '') : line) === h.delimiter) break;
      }
    }
    this.heredocs = [];
  }
}

/** A trace line's words (busybox quotes a word with '…' when it needs quoting), its assignments left out. */
export function tracedWords(traced: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < traced.length; i++) {
    const c = traced[i]!;
    if (c === ' ') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'") {
      const close = traced.indexOf("'", i + 1);
      const end = close < 0 ? traced.length : close;
      word = (word ?? '') + traced.slice(i + 1, end);
      i = end;
    } else if (c === '\\') {
      word = (word ?? '') + (traced[i + 1] ?? '');
      i++;
    } else word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  let k = 0;
  while (k < words.length && ASSIGNMENT.test(words[k]!)) k++;
  return words.slice(k);
}
