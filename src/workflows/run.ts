import fs from 'node:fs';
import { join, posix } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { toFieldIssues } from '../config/parse.js';
import { BerthError } from '../base/errors.js';
import { closeQuietly, openRootDir, withFd } from '../fs/fd-path.js';
import { openDirPath, readFileAt } from '../fs/tree.js';
import { newRunId, type Runner } from '../runs/runner.js';
import type { Project, ProjectStore } from '../store/projects.js';
import { workflowSessionId } from '../store/sessions.js';
import { INPUT_ENV, WorkflowNameSchema, WorkflowSchema, type Workflow, type WorkflowRunRecord } from './schema.js';

const MAX_WORKFLOW_BYTES = 256 * 1024;

/** Progress of a workflow run, step by step (the CLI prints it). */
export interface StepEvent {
  project: string;
  workflow: string;
  index: number;
  total: number;
  name?: string;
  phase: 'start' | 'done';
  exitCode?: number;
  ms?: number;
}

/** Read and validate workflows/<name>.yaml (no-follow, size-capped); errors name the file and step. */
export function loadWorkflow(project: Project, name: string): Workflow {
  const parsedName = WorkflowNameSchema.safeParse(name);
  if (!parsedName.success)
    throw new BerthError('CONFIG_INVALID', `workflow name "${name}" is invalid`, {
      issues: [{ field: 'workflow', reason: parsedName.error.issues[0]?.message ?? 'invalid' }],
    });
  const file = join(project.paths.dir, 'workflows', `${name}.yaml`);
  const text = withFd(openRootDir(project.paths.dir), (root) => {
    const dir = openDirPath(root, ['workflows'], '');
    try {
      return dir === undefined ? undefined : readFileAt(dir, `${name}.yaml`, file, MAX_WORKFLOW_BYTES);
    } finally {
      closeQuietly(dir);
    }
  });
  if (text === undefined)
    throw new BerthError('WORKFLOW_NOT_FOUND', `no workflow "${name}" in project "${project.metadata.name}" (looked for ${file})`);
  let data: unknown;
  try {
    data = parseYaml(text.toString('utf8'));
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const parsed = WorkflowSchema.safeParse(data);
  if (!parsed.success) {
    const issues = toFieldIssues(parsed.error, '', WorkflowSchema);
    throw new BerthError('CONFIG_INVALID', `workflow file ${file} is invalid`, { issues, path: file });
  }
  return parsed.data;
}

export function listWorkflows(project: Project): string[] {
  try {
    return fs
      .readdirSync(join(project.paths.dir, 'workflows'))
      .filter((n) => n.endsWith('.yaml'))
      .map((n) => n.slice(0, -'.yaml'.length))
      .sort();
  } catch {
    return [];
  }
}

/**
 * Run a workflow's steps in order, in the project's private workspace, as the session
 * "wf.<workflow>" (of its project) at the workflow's level. Every step is recorded; the first failing step stops
 * the run. The steps get exactly the project's shared-area grants: a route that
 * points at this workflow gains nothing more.
 */
export async function runWorkflow(
  deps: { store: ProjectStore; runner: Runner; assertGranted: (project: string, area: string) => unknown },
  opts: { project: string; workflow: string; input?: string; onStep?: (event: StepEvent) => void },
): Promise<WorkflowRunRecord> {
  const project = deps.store.get(opts.project);
  const workflow = loadWorkflow(project, opts.workflow);
  // Checked before any step runs: a workflow never starts with an area its project lacks.
  for (const area of workflow.shared) deps.assertGranted(opts.project, area);
  const runId = newRunId().replace(/^r/, 'w');
  const started = new Date().toISOString();
  const steps: WorkflowRunRecord['steps'] = [];
  let error: WorkflowRunRecord['error'];
  for (const [index, step] of workflow.steps.entries()) {
    const runWorkspace = step.workspace_mode === 'run_workspace';
    const cwdRel = runWorkspace ? posix.join('work', 'runs', runId) : '';
    opts.onStep?.({ project: opts.project, workflow: opts.workflow, index, total: workflow.steps.length, name: step.name, phase: 'start' });
    const outcome = await deps.runner.runPrivate(
      opts.project,
      workflowSessionId(opts.workflow),
      `workflow:${opts.workflow}`,
      workflow.permission_level,
      step.message,
      { cwdRel, ensureDir: runWorkspace ? ['work', 'runs', runId] : undefined, env: { [INPUT_ENV]: opts.input ?? '' } },
    );
    steps.push({
      index,
      name: step.name,
      workspace_mode: step.workspace_mode,
      cwd: posix.join('/workspace', cwdRel),
      run: outcome.runId,
      exit_code: outcome.exitCode,
      timed_out: outcome.timedOut,
      stdout: outcome.stdout,
      stderr: outcome.stderr,
      ms: Math.round(outcome.timings.totalMs),
    });
    opts.onStep?.({
      project: opts.project,
      workflow: opts.workflow,
      index,
      total: workflow.steps.length,
      name: step.name,
      phase: 'done',
      exitCode: outcome.exitCode,
      ms: Math.round(outcome.timings.totalMs),
    });
    if (outcome.exitCode !== 0 || outcome.timedOut) {
      error = { step: index, message: outcome.timedOut ? 'timed out' : `exited with ${outcome.exitCode}` };
      break;
    }
  }
  const record: WorkflowRunRecord = {
    workflow_run: runId,
    project: opts.project,
    workflow: opts.workflow,
    status: error ? 'failed' : 'succeeded',
    started_at: started,
    finished_at: new Date().toISOString(),
    steps,
    ...(error ? { error } : {}),
  };
  fs.appendFileSync(join(project.paths.sessionsDir, 'workflow-runs.jsonl'), `${JSON.stringify(record)}\n`, { mode: 0o600 });
  return record;
}
