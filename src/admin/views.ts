import { z } from 'zod';
import { ProjectMetadataSchema, ProjectNameSchema } from '../config/metadata.js';
import { PermissionLevelSchema, SessionIdSchema } from '../config/session.js';
import { SharedGrantSchema } from '../config/grants.js';
import { RUN_KINDS } from '../store/journal.js';
import { RunRecordSchema } from '../store/run-log.js';
import { PauseSchema } from '../store/project-pause.js';
import { TenantKeySchema, WorkspaceRecordSchema } from '../store/workspaces.js';
import { RunFileSchema } from '../store/run-files.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import { REFUSAL_REASONS, type IncomingFile } from '../plan/files-in.js';

/**
 * What the admin surfaces (HTTP, MCP, CLI JSON) return. Defined once, here, from the same
 * schemas the store validates with, so every surface speaks the same shapes.
 */

const SkippedSchema = z.object({ path: z.string(), reason: z.string() });

export const ProtectionViewSchema = z.object({
  taken_at: z.string().nullable().describe('When berth last copied the protected paths (admin create/update).'),
  entries: z.array(
    z.object({
      path: z.string(),
      kind: z.enum(['file', 'dir']),
      source: z.enum(['project', 'empty']).describe('"empty": the path was missing, containers get an empty read-only one.'),
      skipped: z.array(SkippedSchema).describe('Entries not copied (links, special files, over-size files).'),
    }),
  ),
});

export const ProjectViewSchema = ProjectMetadataSchema.extend({
  path: z.string().describe('The project directory on the host.'),
  protection: ProtectionViewSchema,
  workspace_count: z.number().int(),
  sandbox_violations: z.number().int().describe('Gateway sandbox violations by this project’s agents since berth started.'),
  paused: PauseSchema.optional().describe('Present while its operator has it paused: no new run starts (PROJECT_PAUSED).'),
});

export const WorkspaceViewSchema = WorkspaceRecordSchema.extend({
  id: z.string().describe('Derived from the tenant key with the installation secret; also the directory name.'),
  size_bytes: z
    .number()
    .int()
    .describe(
      "Bytes the workspace holds: its filesystem's used blocks under a quota, else the regular files (capped walk, links not followed).",
    ),
  quota: z
    .object({
      size_bytes: z.number().int().describe('What the workspace filesystem holds in all (limits.disk_mb, less ext4 overhead).'),
      files: z.number().int(),
      files_max: z.number().int().describe('Inodes: limits.files, at most one per 8 KiB.'),
    })
    .optional()
    .describe('Present when the workspace is its own loop-mounted filesystem (berth.yaml disk_quotas: loop).'),
});

/** A file sent with a run. */
export const RunRequestFileSchema = z
  .object({
    name: z.string().min(1).max(1024).describe('Its name (made safe: no path, no control characters, no leading dot).'),
    content_base64: z
      .string()
      .max(FILE_BOUNDS.runBodyBytes)
      .refine((v) => /^[A-Za-z0-9+/]*={0,2}$/.test(v) && v.length % 4 === 0, 'must be standard base64 (A-Z a-z 0-9 + /, padded with =)')
      .describe('Its bytes, base64.'),
  })
  .strict();

export const RunRequestSchema = z
  .object({
    user: TenantKeySchema,
    session: SessionIdSchema.optional().describe("The conversation; default: the tenant's default session."),
    level: PermissionLevelSchema.optional().describe("Set the session's permission level (persisted) before the run."),
    message: z
      .string()
      .min(1, 'must not be empty')
      .max(256 * 1024)
      .describe('Handed to the agent as one argument.'),
    files: z
      .array(RunRequestFileSchema)
      .max(FILE_BOUNDS.maxFiles)
      .optional()
      .describe(
        "Files for the agent: they land in the workspace's inbox/ before the run (names made safe, numbered on a collision), bounded by the project's files settings and limits.disk_mb, and the agent is told where they are. One refused is said in files_in; the run still runs.",
      ),
  })
  .strict();

/** The run API's files as the runner takes them. */
export const decodeRunFiles = (files: ReadonlyArray<z.output<typeof RunRequestFileSchema>> | undefined): IncomingFile[] | undefined =>
  files?.map((f) => ({ name: f.name, data: Buffer.from(f.content_base64, 'base64') }));

export const RunFileViewSchema = RunFileSchema.extend({
  url: z.string().describe("Where it is downloaded: the admin token, or the chat login of the run's person (see docs/files.md)."),
});

export const FilesInViewSchema = z.object({
  saved: z.array(
    z.object({
      path: z.string().describe('In the workspace, e.g. "inbox/chart.png".'),
      kind: z.string(),
      size: z.number().int(),
      voice: z.boolean(),
      transcript: z.string().optional().describe('A voice note\'s text, saved beside it ("inbox/voice.ogg.txt"), when it was transcribed.'),
    }),
  ),
  refused: z.array(
    z.object({
      name: z.string(),
      reason: z.enum(REFUSAL_REASONS),
      size: z.number().int().optional(),
    }),
  ),
  notice: z
    .string()
    .optional()
    .describe('What the person is told of them: a refusal, what was heard in a voice note, or why it was not transcribed.'),
});

export const RunViewSchema = z.object({
  run: z.string(),
  project: ProjectNameSchema,
  session: z.string(),
  permission_level: PermissionLevelSchema,
  workspace: z.string(),
  exit_code: z.number().int(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.boolean().describe('Output passed limits.output_bytes: the run was stopped and the output cut.'),
  timed_out: z.boolean().describe('The run passed limits.timeout_seconds and was killed.'),
  timings_ms: z.object({ create: z.number(), start: z.number(), run: z.number(), total: z.number() }),
  warm: z
    .boolean()
    .describe("It ran in the session's warm container (an exec), not a new one (berth serve keeps them; runs.warm_idle_seconds)."),
  warnings: z.array(z.string()),
  steps: RunRecordSchema.shape.steps,
  more_steps: RunRecordSchema.shape.more_steps,
  files_in: FilesInViewSchema.optional().describe('The files sent with the message: where each landed, or why it did not.'),
  files: z
    .array(RunFileViewSchema)
    .optional()
    .describe(
      "Files the agent left in its workspace's outbox/ (or queued with send_file): taken out of outbox/ (kept under outbox/sent/) and downloadable at their url.",
    ),
});

/** Where a run's file is downloaded with the admin token. */
export const runFileUrl = (project: string, run: string, name: string) =>
  `/api/projects/${project}/runs/${run}/files/${encodeURIComponent(name)}`;

export const InterruptedRunSchema = z.object({
  run: z.string(),
  session: z.string().nullable(),
  kind: z.enum(RUN_KINDS).nullable(),
  interrupted_at: z.string(),
  reason: z.string(),
});
export type InterruptedRun = z.infer<typeof InterruptedRunSchema>;

export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string().describe('Stable: match on this, never on the message.'),
    message: z.string(),
    issues: z.array(z.object({ field: z.string(), reason: z.string() })).optional(),
    hint: z.string().optional(),
    path: z.string().optional(),
  }),
});

export type ProjectView = z.infer<typeof ProjectViewSchema>;
export type WorkspaceView = z.infer<typeof WorkspaceViewSchema>;
export type RunView = z.infer<typeof RunViewSchema>;

/** A project's operator view: where it lives and which shared areas it may use. */
export const ProjectAccessSchema = z.object({
  project: z.string(),
  private_workspace: z.string(),
  private_workspace_overridden: z.boolean(),
  shared_access: z.array(SharedGrantSchema),
});
export type ProjectAccess = z.infer<typeof ProjectAccessSchema>;
