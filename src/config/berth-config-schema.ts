import { z } from 'zod';
import { ModelUpstreamsSchema, OperatorEgressSchema } from './outbound.js';
import { BridgesSchema } from './bridges.js';
import { RunsSchema } from './runs.js';
import { OperatorRuntimesSchema } from './runtimes.js';
import { KubernetesSchema, LauncherNameSchema } from './kubernetes.js';
import { SecretsSchema } from './secrets.js';
import { SchedulesSchema } from './schedules.js';
import { OidcSchema } from './oidc.js';
import { TranscriptionSchema } from './transcription.js';
import { CheckpointsSchema } from './checkpoints.js';
import { AlertsSchema } from './alerts.js';

/** berth.yaml's shape (the checks beyond its shape are operator-checks.ts; loading is berth-config.ts). */
export const DEFAULT_SHELL_IMAGE = 'berth/shell:latest';
export const DEFAULT_AGENT_IMAGE = 'berth/agent:latest';

export const AREA_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const AreaNameSchema = z.string().regex(AREA_NAME_PATTERN, 'must be 1-63 characters of a-z, 0-9, "_" and "-"');

export const GrantSchema = z.union([AreaNameSchema, z.object({ name: AreaNameSchema, mode: z.enum(['ro', 'rw']).default('ro') }).strict()]);
export type Grant = z.infer<typeof GrantSchema>;

export const ProjectGrantsSchema = z
  .object({
    private_workspace: z.string().optional().describe('Absolute path of the project directory; default <workspaces_path>/<name>.'),
    shared_access: z
      .array(GrantSchema)
      .default([])
      .describe('Shared areas this project may use (deny by default); a bare name is read-only.'),
    honeytokens: z
      .boolean()
      .optional()
      .describe(
        "Decoy credentials in this project's containers (AWS keys in the environment and ~/.aws, an SSH key): any use freezes the tenant (docs/security.md).",
      ),
    chat_forget: z
      .enum(['operator', 'person'])
      .optional()
      .describe(
        "Who decides a chat person's /forget (everything berth keeps of them removed): the operator (the default) allows it (berth approvals, the console), or the person alone, after confirming (docs/tenant-data.md).",
      ),
  })
  .strict();

/** A route: the project (and default workflow) that answers the chats of one key. */
const RoutesSchema = z.record(z.string().min(1).max(256), z.object({ project: z.string(), workflow: z.string().optional() }).strict());

/** berth.yaml: the operator's settings. Nothing a project admin or tenant sends changes it. */
export const BerthConfigSchema = z
  .object({
    workspaces_path: z
      .string()
      .min(1)
      .default('projects')
      .describe('Where private workspaces (project directories) live; relative to the berth home.'),
    shared_workspaces: z
      .record(AreaNameSchema, z.string())
      .default({})
      .describe('Named shared areas: logical name → absolute, canonical, existing host directory.'),
    projects: z
      .record(z.string(), ProjectGrantsSchema)
      .default({})
      .describe('Per-project operator settings: private workspace override, shared-area grants.'),
    routes: RoutesSchema.default({}).describe(
      'Which project answers a chat: "signal" (every Signal chat), "signal:<chat>" (one), "web" → the project (and default workflow, if any).',
    ),
    channels: RoutesSchema.optional().describe('The old name of routes, still read (doctor says so); a file may not set both.'),
    bridges: BridgesSchema,
    runs: RunsSchema,
    schedules: SchedulesSchema.describe(
      'Runs at a time or on a repeat, made in a chat (/every, /at), by the agent (its schedule tool) or by the operator (berth schedule): docs/schedules.md.',
    ),
    checkpoints: CheckpointsSchema.describe(
      "What berth keeps of a session's workspace and conversation before each message, for /undo and /fork: docs/checkpoints.md.",
    ),
    env: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string())
      .default({})
      .describe(
        'Values for the environment variable names a project lets through (metadata.json "env"). Never API keys: those go in models, where no container sees them.',
      ),
    models: ModelUpstreamsSchema,
    transcription: TranscriptionSchema.optional().describe(
      'Voice notes become text through this upstream (docs/files.md); none: they are saved as files and the person is told voice is not enabled.',
    ),
    alerts: AlertsSchema.describe('Alerts berth sends the operator as they happen (a decoy credential used): docs/security.md.'),
    egress: OperatorEgressSchema.describe("The egress proxy's operator-only settings."),
    secrets: SecretsSchema,
    images: z
      .object({
        shell: z.string().min(1).default(DEFAULT_SHELL_IMAGE).describe('Image for the shell preset.'),
        agent: z.string().min(1).default(DEFAULT_AGENT_IMAGE).describe('Image for the droid/claude/codex presets.'),
      })
      .strict()
      .prefault({}),
    runtimes: OperatorRuntimesSchema,
    launcher: LauncherNameSchema,
    kubernetes: KubernetesSchema.optional(),
    disk_quotas: z
      .enum(['off', 'loop'])
      .default('off')
      .describe(
        'How limits.disk_mb holds for isolated tenant workspaces. "loop": each workspace is its own ext4 image (the kernel answers ENOSPC at the quota; needs root, mkfs.ext4 and loop devices). "off": a per-run check stops a run that grows past it.',
      ),
    oidc: OidcSchema.optional().describe(
      "Sign-in with the organisation's OpenID Connect provider for the console (operators, viewers) and the web chat: docs/production.md.",
    ),
    admin_token: z
      .string()
      .min(16, 'must be at least 16 characters')
      .optional()
      .describe('Bearer token for the HTTP admin API and /mcp; else BERTH_ADMIN_TOKEN, else one is generated.'),
    agent_user: z
      .object({
        uid: z
          .number()
          .int()
          .min(1)
          .max(2 ** 31)
          .default(10001),
        gid: z
          .number()
          .int()
          .min(1)
          .max(2 ** 31)
          .default(10001),
      })
      .strict()
      .prefault({})
      .describe('The non-root user agents run as; tenant workspaces are owned by it.'),
  })
  .strict();

export type BerthConfig = z.output<typeof BerthConfigSchema>;
