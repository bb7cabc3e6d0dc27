import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, ProjectViewSchema, WorkspaceViewSchema } from '../../admin/views.js';
import { WorkspaceProfileSchema } from '../../file-tools/workspace-profile.js';
import { errorResponses, json, NameParams } from './openapi.js';
import type { AdminService } from '../../admin/service.js';
import { ProjectMetadataSchema, ProjectNameSchema, ProjectUpdateSchema } from '../../config/metadata.js';

const errors = errorResponses();

export function registerProjectRoutes(app: OpenAPIHono, admin: () => AdminService): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/workspaces/{id}/profile',
      summary: "A workspace's profile: ecosystem, package manager, format/lint/test commands",
      request: { params: z.object({ name: ProjectNameSchema, id: z.string().regex(/^[0-9a-f]{32}$/, 'is not a workspace id') }) },
      responses: { 200: json(WorkspaceProfileSchema, 'detected from its files, cached until they change'), ...errors },
    }),
    (c) => {
      const { name, id } = c.req.valid('param');
      return c.json(admin().workspaceProfile(name, id), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects',
      summary: 'Create a project',
      description: 'The body is the metadata.json schema; unknown fields are refused. All or nothing.',
      request: { body: { ...json(ProjectMetadataSchema, 'project settings'), required: true } },
      responses: { 201: json(ProjectViewSchema, 'created'), 409: json(ErrorBodySchema, 'PROJECT_EXISTS'), ...errors },
    }),
    (c) => c.json(admin().createProject(c.req.valid('json')), 201),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects',
      summary: 'List projects',
      responses: { 200: json(z.object({ projects: z.array(ProjectViewSchema) }), 'all projects'), 401: errors[401] },
    }),
    (c) => c.json({ projects: admin().listProjects() }, 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}',
      summary: 'Get a project',
      request: { params: NameParams },
      responses: { 200: json(ProjectViewSchema, 'the project'), ...errors },
    }),
    (c) => c.json(admin().getProject(c.req.valid('param').name), 200),
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/projects/{name}',
      summary: 'Change project settings',
      description:
        'Any of workspace_isolation, protected_paths (replaces the list; re-snapshotted), image, agent, limits (merged), env. Applies to every next run; runs in flight keep the settings they started with.',
      request: { params: NameParams, body: { ...json(ProjectUpdateSchema, 'settings to change'), required: true } },
      responses: { 200: json(ProjectViewSchema, 'the updated project'), ...errors },
    }),
    async (c) => c.json(await admin().updateProject(c.req.valid('param').name, c.req.valid('json')), 200),
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/projects/{name}',
      summary: 'Delete a project (to the trash)',
      description:
        "Needs ?confirm=<name>. Stops the project's containers, then moves the directory to .berth/trash/ — tenant data is kept.",
      request: { params: NameParams, query: z.object({ confirm: z.string().optional() }) },
      responses: {
        200: json(z.object({ name: z.string(), trashed_to: z.string(), containers_removed: z.number().int() }), 'moved to the trash'),
        ...errors,
      },
    }),
    async (c) => c.json(await admin().deleteProject(c.req.valid('param').name, c.req.valid('query').confirm), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/projects/{name}/workspaces',
      summary: "List a project's tenant workspaces",
      request: { params: NameParams },
      responses: { 200: json(z.object({ workspaces: z.array(WorkspaceViewSchema) }), 'workspaces, oldest first'), ...errors },
    }),
    (c) => c.json({ workspaces: admin().listWorkspaces(c.req.valid('param').name) }, 200),
  );
}
