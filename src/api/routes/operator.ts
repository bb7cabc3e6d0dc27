import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { OperatorService } from '../../admin/operator.js';
import { ErrorBodySchema, ProjectAccessSchema } from '../../admin/views.js';
import { AREA_NAME_PATTERN } from '../../config/berth-config.js';
import { ProjectNameSchema } from '../../config/metadata.js';
import type { AdminService } from '../../admin/service.js';
import { WorkflowNameSchema, WorkflowRunRecordSchema } from '../../workflows/schema.js';
import { errorResponses, json, NameParams } from './openapi.js';

const AreaSchema = z.string().regex(AREA_NAME_PATTERN, 'is not a shared area name');
const errors = errorResponses('PROJECT_NOT_FOUND or WORKFLOW_NOT_FOUND');

/** Operator routes (the admin token is the operator's): grants, private workspaces, workflows. */
export function registerOperatorRoutes(app: OpenAPIHono, deps: { operator: () => OperatorService; admin: () => AdminService }): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/access',
      summary: "A project's private workspace and shared-area grants",
      request: { params: NameParams },
      responses: { 200: json(ProjectAccessSchema, 'resolved from berth.yaml'), ...errors },
    }),
    (c) => {
      const { name } = c.req.valid('param');
      deps.admin().getProject(name);
      return c.json(deps.operator().access(name), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/shared/{area}',
      summary: 'Check that a project may use a shared area',
      description: 'Deny by default: 403 AREA_NOT_GRANTED (and a log line with project and area) unless berth.yaml grants it.',
      request: { params: z.object({ name: ProjectNameSchema, area: AreaSchema }) },
      responses: {
        200: json(z.object({ name: z.string(), path: z.string(), mode: z.enum(['ro', 'rw']) }), 'the grant'),
        403: json(ErrorBodySchema, 'AREA_NOT_GRANTED'),
        ...errors,
      },
    }),
    (c) => {
      const { name, area } = c.req.valid('param');
      deps.admin().getProject(name);
      return c.json(deps.operator().assertGranted(name, area), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/grants',
      summary: 'Grant a shared area (berth.yaml, comments kept)',
      request: {
        params: NameParams,
        body: { ...json(z.object({ area: AreaSchema, mode: z.enum(['ro', 'rw']).default('ro') }).strict(), 'the grant'), required: true },
      },
      responses: { 200: json(ProjectAccessSchema, 'the new access'), ...errors },
    }),
    async (c) => {
      const { area, mode } = c.req.valid('json');
      return c.json(await deps.operator().grant(c.req.valid('param').name, area, mode), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/projects/{name}/grants/{area}',
      summary: 'Revoke a shared area',
      request: { params: z.object({ name: ProjectNameSchema, area: AreaSchema }) },
      responses: { 200: json(ProjectAccessSchema, 'the new access'), ...errors },
    }),
    async (c) => {
      const { name, area } = c.req.valid('param');
      return c.json(await deps.operator().revoke(name, area), 200);
    },
  );
  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/projects/{name}/private-workspace',
      summary: 'Move the project to an operator-chosen directory (or back, with path null)',
      request: {
        params: NameParams,
        body: { ...json(z.object({ path: z.string().nullable() }).strict(), 'absolute path, or null for the default'), required: true },
      },
      responses: { 200: json(ProjectAccessSchema, 'the new access'), ...errors },
    }),
    async (c) => c.json(await deps.operator().setPrivateWorkspace(c.req.valid('param').name, c.req.valid('json').path ?? undefined), 200),
  );
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/workflows',
      summary: "A project's workflows (workflows/<name>.yaml)",
      request: { params: NameParams },
      responses: { 200: json(z.object({ workflows: z.array(z.string()) }), 'names'), ...errors },
    }),
    (c) => c.json({ workflows: deps.admin().listWorkflows(c.req.valid('param').name) }, 200),
  );
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/workflows/{workflow}/runs',
      summary: 'Run a workflow',
      description:
        'Steps run in order in the private workspace; the first failing step stops the run (status "failed", error names the step).',
      request: {
        params: z.object({ name: ProjectNameSchema, workflow: WorkflowNameSchema }),
        body: {
          ...json(
            z
              .object({
                input: z
                  .string()
                  .max(64 * 1024)
                  .optional(),
              })
              .strict(),
            'reaches every step as the environment variable BERTH_INPUT',
          ),
          required: false,
        },
      },
      responses: { 200: json(WorkflowRunRecordSchema, 'the run, every step recorded'), ...errors },
    }),
    async (c) => {
      const { name, workflow } = c.req.valid('param');
      const body = c.req.header('content-type')?.includes('json') ? c.req.valid('json') : {};
      return c.json(await deps.admin().runWorkflow(name, workflow, body?.input), 200);
    },
  );
}
