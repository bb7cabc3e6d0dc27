import { z } from 'zod';
import { PermissionLevelSchema } from '../config/session.js';

/** The environment variable that carries a workflow run's input into every step. */
export const INPUT_ENV = 'BERTH_INPUT';
/** The old placeholder, refused: it pasted input into shell text. */
const INPUT_PLACEHOLDER = '{input}';

export const WORKSPACE_MODES = ['orchestrator_workspace', 'run_workspace'] as const;

export const WorkflowNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1-63 characters of a-z, 0-9, "_" and "-"')
  .describe('A workflow: workflows/<name>.yaml of the project.');

export const WorkflowStepSchema = z
  .object({
    name: z.string().min(1).max(100).optional(),
    message: z
      .string()
      .min(1)
      .max(64 * 1024)
      .refine((m) => !m.includes(INPUT_PLACEHOLDER), {
        message: `must not contain ${INPUT_PLACEHOLDER}: the run input is never pasted into a message; the step reads it from $${INPUT_ENV} (e.g. 'printf "%s" "$${INPUT_ENV}" > answer.txt')`,
      })
      .describe(`The agent message. The run input reaches the step as data, in the environment variable ${INPUT_ENV}.`),
    workspace_mode: z
      .enum(WORKSPACE_MODES, {
        error: (issue) =>
          `must be one of ${WORKSPACE_MODES.join(', ')}${issue.input === undefined ? '' : ` (got ${JSON.stringify(issue.input)})`}`,
      })
      .describe('orchestrator_workspace: cwd = the private workspace root; run_workspace: cwd = work/runs/<run_id>.'),
  })
  .strict();

/** workflows/<name>.yaml under a project's private workspace. */
export const WorkflowSchema = z
  .object({
    description: z.string().max(2000).optional(),
    permission_level: PermissionLevelSchema.default('medium').describe("The steps' session level (network, memory)."),
    shared: z
      .array(z.string())
      .max(32)
      .default([])
      .describe('Shared areas the workflow needs; refused (and logged) unless the project holds the grants.'),
    steps: z.array(WorkflowStepSchema).min(1).max(50),
  })
  .strict();
export type Workflow = z.infer<typeof WorkflowSchema>;

export const WorkflowStepRecordSchema = z.object({
  index: z.number().int(),
  name: z.string().optional(),
  workspace_mode: z.enum(WORKSPACE_MODES),
  cwd: z.string(),
  run: z.string(),
  exit_code: z.number().int(),
  timed_out: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  ms: z.number(),
});

export const WorkflowRunRecordSchema = z.object({
  workflow_run: z.string(),
  project: z.string(),
  workflow: z.string(),
  status: z.enum(['succeeded', 'failed']),
  started_at: z.string(),
  finished_at: z.string(),
  steps: z.array(WorkflowStepRecordSchema),
  error: z.object({ step: z.number().int(), message: z.string() }).optional(),
});
export type WorkflowRunRecord = z.infer<typeof WorkflowRunRecordSchema>;
