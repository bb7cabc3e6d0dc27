import { z } from 'zod';
import { didYouMean } from '../base/did-you-mean.js';
import { own } from '../base/own.js';
import { PermissionLevelSchema, type PermissionLevel } from './session.js';

/**
 * OCI runtimes: berth.yaml names those the operator offers (the engine must have them too), and a
 * project picks one, for all its runs or per permission level. runc shares the host kernel;
 * runsc (gVisor) puts a user-space kernel between the agent and the host's.
 */
export const DEFAULT_RUNTIME = 'runc';
/**
 * The engine's pids limit under runsc bounds the sandbox's host tasks, not the agent's processes
 * (gVisor enforces none inside): the sentry, the gofer and ~30 ptrace stubs per process running at
 * once, kept after they exit (measured: 50 idle, 420-450 with 8 processes at once, 986 with 32).
 * Past it the whole sandbox ends. So a runsc plan gets at least this many.
 */
export const RUNSC_MIN_PIDS = 1024;

/** The engine pids limit for a project's limit under a runtime. */
export function enginePids(pids: number, runtime: string): number {
  return runtime === 'runsc' ? Math.max(pids, RUNSC_MIN_PIDS) : pids;
}

export const RuntimeNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'must be 1-63 characters of a-z, 0-9, ".", "_" and "-"')
  .describe('An OCI runtime the engine offers: runc, runsc (gVisor), kata, ...');

export const OperatorRuntimesSchema = z
  .array(RuntimeNameSchema)
  .min(1)
  .max(16)
  .default([DEFAULT_RUNTIME])
  .describe(
    'OCI runtimes projects may choose (each must be registered with the engine: "berth doctor" says which are). runc is the default.',
  );

export const LevelRuntimesSchema = z
  .partialRecord(PermissionLevelSchema, RuntimeNameSchema)
  .default({})
  .describe("A runtime per permission level, over the project's runtime (e.g. high: runsc).");

/**
 * A project's choice of runtimes against what berth.yaml offers: the fields at fault, so a create
 * or update is refused with the list to choose from (CONFIG_INVALID), never stored to fail at run time.
 */
export function runtimeChoiceIssues(
  choice: { runtime?: string; level_runtimes?: Partial<Record<PermissionLevel, string>> },
  offered: readonly string[],
): Array<{ field: string; reason: string }> {
  const reason = (name: string) =>
    `runtime "${name}" is not one berth.yaml offers${didYouMean(name, offered)} (runtimes: ${offered.join(', ')})`;
  // Only names are judged here; a value of the wrong shape is the schema's to refuse.
  const issues =
    typeof choice.runtime === 'string' && !offered.includes(choice.runtime) ? [{ field: 'runtime', reason: reason(choice.runtime) }] : [];
  const byLevel = typeof choice.level_runtimes === 'object' && choice.level_runtimes !== null ? choice.level_runtimes : {};
  for (const [level, name] of Object.entries(byLevel)) {
    if (typeof name === 'string' && !offered.includes(name)) issues.push({ field: `level_runtimes.${level}`, reason: reason(name) });
  }
  return issues;
}

/** The runtime a run at `level` uses. */
export function runtimeFor(
  meta: { runtime: string; level_runtimes: Partial<Record<PermissionLevel, string>> },
  level: PermissionLevel,
): string {
  return own(meta.level_runtimes, level) ?? meta.runtime;
}
