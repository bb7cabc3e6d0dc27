import { modelChoiceIssues } from '../config/outbound.js';
import { runtimeChoiceIssues } from '../config/runtimes.js';
import { BerthError } from '../base/errors.js';
import type { RunOutcome } from '../runs/runner.js';
import type { Project } from '../store/projects.js';
import { listWorkspaces } from '../store/workspaces.js';
import { readPause } from '../store/project-pause.js';
import { runFileUrl, type ProjectView, type RunView } from './views.js';
import type { BerthConfig } from '../config/berth-config.js';

// The service's answers as every surface shows them, and the operator's choices it checks.

export function viewOf(p: Project, sandboxViolations: number): ProjectView {
  const pause = readPause(p.paths.stateDir);
  return {
    ...p.metadata,
    sandbox_violations: sandboxViolations,
    path: p.paths.dir,
    protection: p.snapshot ? { taken_at: p.snapshot.taken_at, entries: p.snapshot.entries } : { taken_at: null, entries: [] },
    workspace_count: listWorkspaces(p).length,
    ...(pause ? { paused: pause } : {}),
  };
}

/** A runtime or model upstream berth.yaml does not offer is refused with the list to choose from. */
export function assertOperatorChoices(
  choice: Parameters<typeof runtimeChoiceIssues>[0] & Parameters<typeof modelChoiceIssues>[0],
  config: BerthConfig,
): void {
  const defined = Object.keys(config.models);
  const runtimes = runtimeChoiceIssues(choice, config.runtimes);
  const issues = [...runtimes, ...modelChoiceIssues(choice, defined)];
  if (!issues.length) return;
  const hint = runtimes.length
    ? 'register the runtime with the engine and add it to berth.yaml runtimes (docs/security.md, "Stronger isolation: gVisor")'
    : `${defined.length ? `berth.yaml's models: ${defined.join(', ')}` : 'berth.yaml defines no models yet'}; docs/agents.md adds one with its key`;
  // The value is named once, in its field's reason; the message only says what was refused.
  throw new BerthError('CONFIG_INVALID', 'project settings is invalid', { issues, hint });
}

export function runView(o: RunOutcome): RunView {
  const { record } = o;
  return {
    run: o.runId,
    project: o.project,
    session: o.sessionId,
    permission_level: o.permissionLevel,
    workspace: o.workspaceId,
    exit_code: o.exitCode,
    stdout: o.stdout,
    stderr: o.stderr,
    truncated: o.truncated,
    timed_out: o.timedOut,
    timings_ms: record.timings_ms,
    warm: o.warm,
    warnings: o.warnings,
    ...(record.steps ? { steps: record.steps } : {}),
    ...(record.more_steps ? { more_steps: record.more_steps } : {}),
    ...(o.files?.in ? { files_in: o.files.in } : {}),
    ...(o.files?.out?.files.length ? { files: o.files.out.files.map((f) => ({ ...f, url: runFileUrl(o.project, o.runId, f.name) })) } : {}),
  };
}
