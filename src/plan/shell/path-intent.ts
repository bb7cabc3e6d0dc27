/** A form allowed at level high only, and the rule that refuses it below. */
export interface HighOnly {
  rule: string;
  message: string;
}

/** What a command reads, writes and runs; the parsers fill it in, in argument order (the first highOnly is the one reported). */
export interface PathIntent {
  reads: string[];
  writes: string[];
  /** Forms allowed at level high only (they run programs, or reach paths the policy cannot see). */
  highOnly: HighOnly[];
  /** Commands this one runs (find -exec, env COMMAND), checked as commands of their own at high; cwd relative to the caller's. */
  runs: Array<{ argv: string[]; cwd?: string }>;
}

export const execOnly = (what: string): HighOnly => ({
  rule: 'exec_not_allowed',
  message: `${what} is allowed at permission level high only`,
});
