import { z } from 'zod';
import { READ_ONLY, tool, type ToolSpec } from './tool-spec.js';
import type { OperatorService } from '../admin/operator.js';
import type { AdminService } from '../admin/service.js';
import { WorkflowNameSchema, WorkflowRunRecordSchema } from '../workflows/schema.js';
import {
  decodeRunFiles,
  ProjectAccessSchema,
  ProjectViewSchema,
  RunRequestSchema,
  RunViewSchema,
  WorkspaceViewSchema,
} from '../admin/views.js';
import { ProjectMetadataSchema, ProjectNameSchema, ProjectUpdateSchema } from '../config/metadata.js';
import { SessionIdSchema, SessionRecordSchema, SessionSettingsUpdateSchema } from '../config/session.js';

/** What admin tools run against. berth's admin MCP tools are data: their inputs and outputs are the same zod schemas the HTTP API uses. */
export interface AdminContext {
  admin: AdminService;
  operator: OperatorService;
}

const ProjectOut = z.object({ project: ProjectViewSchema });
const AreaRefSchema = z.string().max(64).describe('A shared area named in berth.yaml (shared_workspaces).');

export const ADMIN_TOOLS: ToolSpec<AdminContext>[] = [
  tool({
    name: 'project_create',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    description:
      'Create a project (its settings are the metadata.json schema: workspace_isolation, protected_paths, image, agent, limits, env).',
    input: ProjectMetadataSchema,
    output: ProjectOut,
    run: ({ admin }, input) => ({ project: admin.createProject(input) }),
  }),
  tool({
    name: 'project_get',
    annotations: READ_ONLY,
    description: "A project's settings, including workspace_isolation and protected_paths, and its protection snapshot.",
    input: z.object({ name: ProjectNameSchema }).strict(),
    output: ProjectOut,
    run: ({ admin }, { name }) => ({ project: admin.getProject(name) }),
  }),
  tool({
    name: 'project_list',
    annotations: READ_ONLY,
    description: 'All projects.',
    input: z.object({}).strict(),
    output: z.object({ projects: z.array(ProjectViewSchema) }),
    run: ({ admin }) => ({ projects: admin.listProjects() }),
  }),
  tool({
    name: 'project_update',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    description:
      'Change settings (workspace_isolation, protected_paths — replaces the list —, image, agent, limits, env). Applies to every next run.',
    input: ProjectUpdateSchema.extend({ name: ProjectNameSchema }).strict(),
    output: ProjectOut,
    run: async ({ admin }, { name, ...patch }) => ({ project: await admin.updateProject(name, patch) }),
  }),
  tool({
    name: 'workspace_list',
    annotations: READ_ONLY,
    description: "A project's tenant workspaces: id, tenant key, created, size.",
    input: z.object({ project: ProjectNameSchema }).strict(),
    output: z.object({ workspaces: z.array(WorkspaceViewSchema) }),
    run: ({ admin }, { project }) => ({ workspaces: admin.listWorkspaces(project) }),
  }),
  tool({
    name: 'run_message',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    description:
      "Run the project's agent for a tenant (user = tenant key) with a message, and files for its inbox/ (base64; bounded by this endpoint's body size too); returns output, exit code, timings, and the files it left in outbox/ (with their download URLs).",
    input: RunRequestSchema.extend({ project: ProjectNameSchema }).strict(),
    output: z.object({ run: RunViewSchema }),
    run: async ({ admin }, { project, files, ...request }) => ({
      run: await admin.runMessage(project, { ...request, files: decodeRunFiles(files) }),
    }),
  }),
  tool({
    name: 'session_get',
    annotations: READ_ONLY,
    description: "A session's settings (permission_level, workspace) and counters.",
    input: z.object({ project: ProjectNameSchema, session: SessionIdSchema }).strict(),
    output: z.object({ session: SessionRecordSchema }),
    run: ({ admin }, { project, session }) => ({ session: admin.getSession(project, session) }),
  }),
  tool({
    name: 'session_update',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    description: "Change a session's permission_level (low, medium, high) or workspace mode (tenant, session).",
    input: z
      .object({ project: ProjectNameSchema, session: SessionIdSchema, settings: SessionSettingsUpdateSchema.shape.settings })
      .strict(),
    output: z.object({ session: SessionRecordSchema }),
    run: ({ admin }, { project, session, settings }) => ({ session: admin.updateSession(project, session, settings) }),
  }),
  tool({
    name: 'project_grant',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    description: 'Operator: grant a project a shared area from berth.yaml (read-only unless mode rw). Deny by default.',
    input: z
      .object({
        project: ProjectNameSchema,
        area: AreaRefSchema,
        mode: z.enum(['ro', 'rw']).default('ro').describe('"ro" (default) or "rw".'),
      })
      .strict(),
    output: z.object({ access: ProjectAccessSchema }),
    run: async ({ operator }, { project, area, mode }) => ({ access: await operator.grant(project, area, mode) }),
  }),
  tool({
    name: 'project_revoke',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    description: 'Operator: revoke a shared-area grant.',
    input: z.object({ project: ProjectNameSchema, area: AreaRefSchema }).strict(),
    output: z.object({ access: ProjectAccessSchema }),
    run: async ({ operator }, { project, area }) => ({ access: await operator.revoke(project, area) }),
  }),
  tool({
    name: 'workflow_run',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    description:
      "Run a project's workflow (workflows/<name>.yaml) with an optional input; every step recorded, the first failure stops it.",
    input: z
      .object({
        project: ProjectNameSchema,
        workflow: WorkflowNameSchema,
        input: z
          .string()
          .max(64 * 1024)
          .optional()
          .describe('Reaches every step as $BERTH_INPUT.'),
      })
      .strict(),
    output: z.object({ run: WorkflowRunRecordSchema }),
    run: async ({ admin }, { project, workflow, input }) => ({
      run: await admin.runWorkflow(project, workflow, input),
    }),
  }),
];
