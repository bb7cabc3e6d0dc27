import type { Mode, ValueKind } from './bins.js';
import { notAllowed } from './deny.js';
import type { CompiledTable, OptionDef } from './table.js';

export interface ParsedOption {
  name: string;
  def: OptionDef;
  value?: string;
}

export interface Parsed {
  options: ParsedOption[];
  operands: string[];
}

/** GNU getopt, restricted to the table: clusters (-la), attached values (-C/etc, -n5, --directory=/etc), "--", "-" as stdin. */
export function parseOptions(bin: string, t: CompiledTable, args: string[]): Parsed {
  const options: ParsedOption[] = [];
  const operands: string[] = [];
  const lookup = (name: string) => {
    const def = t.options.get(name);
    if (!def) throw notAllowed(bin, `option "${name}"`);
    return def;
  };
  if (t.oldStyle) args = oldStyleArgs(bin, t, args);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    // A value not attached to its option is the next word; an optional one is only ever attached.
    const detached = (name: string, def: OptionDef): ParsedOption => {
      if (def.optional) return { name, def };
      if (i + 1 >= args.length) throw notAllowed(bin, `option "${name}" without its value`);
      return { name, def, value: args[++i] as string };
    };
    if (arg === '--') {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-' || !arg.startsWith('-')) {
      if (t.stopAtOperand) {
        operands.push(...args.slice(i));
        break;
      }
      operands.push(arg);
      continue;
    }
    if (arg.startsWith('--')) {
      // Exact names only: GNU's abbreviations (--to-com) would let a prefix of an allowed name reach another option.
      const eq = arg.indexOf('=');
      const name = eq === -1 ? arg : arg.slice(0, eq);
      const def = lookup(name);
      if (!def.value) {
        if (eq !== -1) throw notAllowed(bin, `option "${name}" with a value`);
        options.push({ name, def });
      } else if (eq !== -1) options.push({ name, def, value: arg.slice(eq + 1) });
      else options.push(detached(name, def));
      continue;
    }
    if (t.numeric && /^-\d+$/.test(arg)) {
      options.push({ name: arg, def: {} });
      continue;
    }
    for (let j = 1; j < arg.length; j++) {
      const name = `-${arg[j]}`;
      const def = lookup(name);
      if (!def.value) {
        options.push({ name, def });
        continue;
      }
      const rest = arg.slice(j + 1);
      if (rest) options.push({ name, def, value: rest });
      else options.push(detached(name, def));
      break;
    }
  }
  return { options, operands };
}

/**
 * "tar czf out.tgz src" → "tar -czf out.tgz src". GNU gives each value-taking letter the next
 * word in turn, busybox hands the rest of the cluster to the first one; they agree only when
 * one letter takes a value and it comes last, so anything else is refused.
 */
function oldStyleArgs(bin: string, t: CompiledTable, args: string[]): string[] {
  const [first, ...rest] = args;
  if (first === undefined || first.startsWith('-')) return args;
  const letters = [...first];
  const valued = letters.filter((l) => t.options.get(`-${l}`)?.value);
  if (valued.length > 1 || (valued.length === 1 && letters.at(-1) !== valued[0])) {
    throw notAllowed(bin, `option cluster "${first}" (write it as "-${letters.join(' -')}" with each value after its option)`);
  }
  return [`-${first}`, ...rest];
}

/** Whether an option of this kind or mode was given. */
export const has = (parsed: Parsed, k: ValueKind | Mode) => parsed.options.some((o) => o.def.value === k || o.def.mode === k);
/** The values given to options of this kind, in order. */
export const valuesOf = (parsed: Parsed, k: ValueKind) =>
  parsed.options.flatMap((o) => (o.def.value === k && o.value !== undefined ? [o.value] : []));
