import { ASSIGNMENT, ShellScanner, tracedWords, type ShellWord } from './shell-words.js';

/**
 * The demo shell's message read as the person wrote it, for its step labels: busybox `sh -x`
 * traces a command's words but never its redirections, and writes a trace word by word, so the
 * two sides of a pipeline come interleaved. What the trace lacks is taken from the source: each
 * simple command's redirections, and each pipeline as one step, as written.
 *
 * Pure and forgiving: a message this reader does not follow (an unusual construct, a quote left
 * open) only gives fewer units, and a trace line no unit matches keeps its traced words. Bounded:
 * one pass over the message, at most SHELL_UNITS_MAX units.
 */

export interface ShellCommandUnit {
  kind: 'command';
  /** Its name when written plainly (no quote, expansion or glob); undefined: it is not matched by name. */
  name: string | undefined;
  /** Its other plain words (unquoted): a trace of this command has each of them. */
  literals: string[];
  /** Its redirections as written ("> notes.txt", "2>/dev/null"), its compound's after its own. */
  redirections: string[];
}

export interface ShellPipelineUnit {
  kind: 'pipeline';
  /** Each member's name when written plainly. */
  names: Array<string | undefined>;
  /** The pipeline as written (whitespace folded). */
  text: string;
  /** How many commands trace for it (one per member). */
  size: number;
}

export type ShellUnit = ShellCommandUnit | ShellPipelineUnit;

export const SHELL_UNITS_MAX = 512;

const RESERVED = new Set(['case', 'if', 'then', 'else', 'elif', 'fi', 'do', 'done', 'while', 'until', '{', '}', '!', 'esac', 'in']);
const OPENERS = new Set(['if', 'do', '{', 'case']);
const CLOSERS = new Set(['fi', 'done', '}', 'esac']);

interface Member {
  words: ShellWord[];
  redirections: string[];
  start: number;
  end: number;
}

function commandOf(member: Member): ShellCommandUnit {
  const words = member.words;
  let k = 0;
  while (k < words.length && ASSIGNMENT.test(words[k]!.text)) k++;
  return {
    kind: 'command',
    name: words[k]?.plain,
    literals: words.slice(k + 1).flatMap((w) => (w.plain !== undefined && w.plain !== '' ? [w.plain] : [])),
    redirections: member.redirections,
  };
}

/** The units so far, and the pipeline being read: its members, and the compounds around it. */
class Units {
  readonly list: ShellUnit[] = [];
  private members: Member[] = [];
  m: Member = { words: [], redirections: [], start: 0, end: 0 };
  /** Compounds open here: the index of their first unit. */
  readonly open: number[] = [];
  /** A compound just closed (`done`, `}`, `)`): a redirection after it applies to every command since. */
  closedAt: number | undefined;
  /** A compound is a side of this pipeline: its sides are not one step. */
  compoundPipe = false;

  constructor(private readonly src: string) {}

  get pipelineStarted(): boolean {
    return this.members.length > 0;
  }

  endMember(at: number) {
    this.m.end = at;
    this.members.push(this.m);
    this.m = { words: [], redirections: [], start: at, end: at };
  }

  endPipeline(at: number) {
    this.endMember(at);
    const real = this.members.filter((x) => x.words.length > 0 || x.redirections.length > 0);
    if (this.closedAt !== undefined && real.length === 1 && real[0]!.words.length === 0) {
      // `done > out`, `} 2>&1`: the compound's redirections go to every command inside it.
      for (const u of this.list.slice(this.closedAt)) if (u.kind === 'command') u.redirections.push(...real[0]!.redirections);
    } else if (real.length > 1 && !this.compoundPipe && real.every((x) => x.words.length > 0)) {
      this.list.push({
        kind: 'pipeline',
        names: real.map((x) => commandOf(x).name),
        text: this.src
          .slice(real[0]!.start, real[real.length - 1]!.end)
          .replace(/\s+/g, ' ')
          .trim(),
        size: real.length,
      });
    } else this.list.push(...real.map(commandOf));
    this.members = [];
    this.closedAt = undefined;
    this.compoundPipe = false;
  }
}

/** The message's simple commands and pipelines, in the order they are written. */
export function readShellSource(message: string): ShellUnit[] {
  const at = new ShellScanner(message);
  const src = message;
  const u = new Units(src);
  // `for x in …` and `case … in` headers and case patterns are not commands: their words are skipped.
  let skipping: 'for' | 'case' | 'pattern' | undefined;
  while (at.i < src.length && u.list.length < SHELL_UNITS_MAX) {
    const c = src[at.i]!;
    if (c === ' ' || c === '\t') {
      at.i++;
    } else if (c === '#' && (at.i === 0 || /[\s;&|()]/.test(src[at.i - 1]!))) {
      const nl = src.indexOf('\n', at.i);
      at.i = nl < 0 ? src.length : nl;
    } else if (c === '\n') {
      u.endPipeline(at.i++);
      if (skipping === 'for') skipping = undefined;
      at.skipHeredocs();
    } else if (REDIRECTION.test(src.slice(at.i, at.i + 8))) {
      // A redirection: its operator (with the file descriptor written before it), then its target.
      const [op, , fdKind, , ampKind] = REDIRECTION.exec(src.slice(at.i, at.i + 8))!;
      const kind = fdKind ?? ampKind;
      const start = at.i;
      at.i += op.length;
      while (src[at.i] === ' ' || src[at.i] === '\t') at.i++;
      const target = at.readWord();
      if (kind === '<<' || kind === '<<-') at.heredoc(target, kind === '<<-');
      if (!skipping) u.m.redirections.push(src.slice(start, at.i));
    } else if (';&|()'.includes(c)) {
      const two = src.slice(at.i, at.i + 2);
      if (skipping === 'pattern' && c !== ')') {
        at.i++;
        continue;
      }
      if (c === '|' && two !== '||') {
        if (u.m.words.length === 0) u.compoundPipe = true; // `done | sort`
        u.endMember(at.i++);
        continue;
      }
      u.endPipeline(at.i);
      at.i += two === '&&' || two === '||' || two === ';;' ? 2 : 1;
      if (two === ';;') skipping = 'pattern';
      else if (c === ')' && skipping === 'pattern') skipping = undefined;
      else if (c === '(') u.open.push(u.list.length);
      else if (c === ')') u.closedAt = u.open.pop();
      else if (skipping === 'for') skipping = undefined;
    } else {
      const start = at.i;
      const word = at.readWord();
      if (at.i === start)
        at.i++; // a character no rule takes: past it
      else if (skipping === 'case' && word.text === 'in') skipping = 'pattern';
      else if (skipping === 'pattern' && word.text === 'esac') {
        skipping = undefined;
        u.closedAt = u.open.pop();
      } else if (skipping) continue;
      else if (u.m.words.length === 0 && u.m.redirections.length === 0 && RESERVED.has(word.text)) {
        // A reserved word where a command starts: part of a compound, not a command.
        if (u.pipelineStarted && word.text !== '!') u.compoundPipe = true;
        if (OPENERS.has(word.text)) u.open.push(u.list.length);
        if (CLOSERS.has(word.text)) u.closedAt = u.open.pop();
        if (word.text === 'case') skipping = 'case';
      } else if (u.m.words.length === 0 && u.m.redirections.length === 0 && (word.text === 'for' || word.text === 'select')) {
        if (u.pipelineStarted) u.compoundPipe = true;
        skipping = 'for';
      } else {
        if (u.m.words.length === 0) u.m.start = start;
        u.m.words.push(word);
      }
    }
  }
  if (u.list.length < SHELL_UNITS_MAX) u.endPipeline(src.length);
  return u.list.slice(0, SHELL_UNITS_MAX);
}

/** `2>`, `>>`, `<<-`, `>&`, `&>` …: an optional file descriptor, then the operator (`&>` takes none). */
const REDIRECTION = /^(?:(\d*)(<<-|<<|<>|<&|>&|>>|>\||<|>)|()(&>))/;

/**
 * Finds the unit a trace line is of: the next one from `from` (then from the start: a loop
 * traces its commands again) whose name is the traced command's and whose plain words it has.
 * A pipeline's sides interleave, so its trace need only start with one of its names.
 */
export function matchShellUnit(units: readonly ShellUnit[], traced: string, from: number): number | undefined {
  const words = tracedWords(traced);
  const fits = (u: ShellUnit): boolean => {
    if (u.kind === 'pipeline') return u.names.some((n) => n !== undefined && traced.trimStart().startsWith(n));
    if (u.name === undefined) return words.length === 0 && traced.trim() === '' && u.redirections.length > 0;
    return words[0] === u.name && u.literals.every((l) => words.includes(l));
  };
  for (let n = 0; n < units.length; n++) {
    const at = (from + n) % units.length;
    if (fits(units[at]!)) return at;
  }
  return undefined;
}
