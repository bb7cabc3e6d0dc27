import { parseArgs, type ParseArgsConfig } from 'node:util';
import { own } from '../base/own.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** -5, -0.5, -.5, -1e3: a value, never an option (no berth option is a digit). */
const NEGATIVE_NUMBER = /^-(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i;

/**
 * Node's parseArgs, strict, except that a negative number is a value: `config set
 * runs.warm_idle_seconds -5` has the positional "-5", and `--timeout -5` the value "-5"
 * (parseArgs alone refuses both as an unknown option or an ambiguous value).
 */
export function parseCommandArgs(args: string[], options: Options): { values: Record<string, unknown>; positionals: string[] } {
  const kept: string[] = [];
  /** Where each kept argument stood in `args`, so positionals keep their order. */
  const keptAt: number[] = [];
  const numbers: Array<{ at: number; value: string }> = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') {
      for (let j = i; j < args.length; j++) (kept.push(args[j] as string), keptAt.push(j));
      break;
    }
    const previous = kept.at(-1);
    if (NEGATIVE_NUMBER.test(arg)) {
      if (previous !== undefined && keptAt.at(-1) === i - 1 && takesValue(previous, options)) kept[kept.length - 1] = `${previous}=${arg}`;
      else numbers.push({ at: i, value: arg });
      continue;
    }
    kept.push(arg);
    keptAt.push(i);
  }
  const { values, tokens } = parseArgs({ args: kept, options, allowPositionals: true, strict: true, tokens: true });
  const positionals = tokens.flatMap((t) => (t.kind === 'positional' ? [{ at: keptAt[t.index] as number, value: t.value }] : []));
  return { values, positionals: [...positionals, ...numbers].sort((a, b) => a.at - b.at).map((p) => p.value) };
}

/** `--name` (no "=value") of an option that takes a string: the next argument is its value. */
function takesValue(arg: string, options: Options): boolean {
  return arg.startsWith('--') && !arg.includes('=') && own(options, arg.slice(2))?.type === 'string';
}
