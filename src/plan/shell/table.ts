import { type GrammarSpec, type Mode, names, type OptionTable, SHELL_BINS, type ValueKind } from './bins.js';

/** Accepted by every getopt-style binary. */
const COMMON_FLAGS = '--help --version';

/** One option of a binary, as the argv parser looks it up. */
export interface OptionDef {
  /** Absent for a flag. */
  value?: ValueKind;
  optional?: boolean;
  mode?: Mode;
  highOnly?: boolean;
}

export interface CompiledTable extends OptionTable {
  options: Map<string, OptionDef>;
}

/** The table as lookups; an inconsistent entry (a name twice, a high-only name not listed) fails at load. */
function compile(bin: string, t: OptionTable): CompiledTable {
  const options = new Map<string, OptionDef>();
  const add = (name: string, def: OptionDef) => {
    if (!/^-(-[a-z0-9][a-z0-9.-]*|[^-])$/.test(name) || options.has(name)) throw new Error(`shell-policy table: ${bin} ${name}`);
    options.set(name, def);
  };
  for (const n of names(`${t.flags ?? ''} ${COMMON_FLAGS}`)) add(n, {});
  for (const [list, mode] of Object.entries(t.modes ?? {})) for (const n of names(list)) add(n, { mode });
  for (const [list, spec] of Object.entries(t.values ?? {})) {
    const optional = spec.endsWith('?');
    for (const n of names(list)) add(n, { value: spec.replace('?', '') as ValueKind, optional });
  }
  for (const n of names(t.highOnly ?? '')) {
    const def = options.get(n);
    if (!def) throw new Error(`shell-policy table: ${bin} ${n} is high-only but not listed`);
    def.highOnly = true;
  }
  return { ...t, options };
}

/** SHELL_BINS as lookups, compiled at load. */
export const TABLE = new Map<string, CompiledTable | GrammarSpec>(
  Object.entries(SHELL_BINS).map(([bin, spec]) => [bin, 'grammar' in spec ? spec : compile(bin, spec)]),
);
