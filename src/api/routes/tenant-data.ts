import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import type { TenantData } from '../../admin/tenant-data.js';
import { BerthError } from '../../base/errors.js';
import { TenantKeySchema } from '../../store/workspaces.js';
import { errorResponses, json, NameParams } from './openapi.js';

/**
 * A person's data over the API (the CLI's `berth tenant export|forget|frozen|unfreeze`, for
 * scripts): the archive streamed back, then removed from berth's temp space; one export at a time
 * per process (each reads a person's whole tree).
 */
const TenantParams = NameParams.extend({ tenant: TenantKeySchema });
const RemovedSchema = z.record(z.string(), z.number().int());
const FrozenSchema = z.object({ project: z.string(), tenant: z.string(), at: z.string(), where: z.string(), run: z.string().optional() });

export function registerTenantDataRoutes(app: OpenAPIHono, tenants: () => TenantData): void {
  let exporting = false;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/tenants/{tenant}/export',
      operationId: 'exportTenant',
      summary: 'Everything berth keeps of one person in a project, as one tar archive (docs/tenant-data.md)',
      request: { params: TenantParams },
      responses: {
        200: {
          description: 'the archive (manifest.json inside says what is in it)',
          content: { 'application/x-tar': { schema: z.string() } },
        },
        ...errorResponses(),
      },
    }),
    async (c) => {
      const { name, tenant } = c.req.valid('param');
      if (exporting) throw new BerthError('BUSY', 'another export is being written; try again when it is done');
      exporting = true;
      const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-tenant-export-'));
      const done = () => {
        exporting = false;
        fs.rmSync(dir, { recursive: true, force: true });
      };
      try {
        const out = join(dir, 'tenant.tar');
        await tenants().export(name, tenant, out);
        const file = fs.createReadStream(out);
        file.once('close', done);
        return new Response(Readable.toWeb(file) as ReadableStream, {
          status: 200,
          headers: {
            'content-type': 'application/x-tar',
            'content-length': String(fs.statSync(out).size),
            'content-disposition': `attachment; filename="${name}-tenant.tar"`,
            'cache-control': 'no-store',
          },
        });
      } catch (err) {
        done();
        throw err;
      }
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/tenants/{tenant}/forget',
      operationId: 'forgetTenant',
      summary: 'Remove everything berth keeps of one person in a project (one audit line remains, naming them by digest)',
      request: {
        params: TenantParams,
        body: { ...json(z.object({ confirm: z.string().describe('The tenant key again.') }).strict(), 'the confirmation'), required: true },
      },
      responses: {
        200: json(z.object({ project: z.string(), tenant: z.string(), removed: RemovedSchema }), 'what went'),
        ...errorResponses(),
      },
    }),
    async (c) => {
      const { name, tenant } = c.req.valid('param');
      return c.json(await tenants().forget(name, tenant, c.req.valid('json').confirm), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/tenants/frozen',
      operationId: 'listFrozenTenants',
      summary: 'Tenants whose runs are stopped because one of their decoy credentials was used',
      responses: { 200: json(z.object({ frozen: z.array(FrozenSchema) }), 'the frozen tenants'), ...errorResponses() },
    }),
    (c) => c.json({ frozen: tenants().frozen() }, 200),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/projects/{name}/tenants/{tenant}/unfreeze',
      operationId: 'unfreezeTenant',
      summary: 'Let a frozen tenant run again',
      request: { params: TenantParams },
      responses: {
        200: json(z.object({ project: z.string(), tenant: z.string(), unfrozen: z.boolean() }), 'lifted, or was not frozen'),
        ...errorResponses(),
      },
    }),
    (c) => {
      const { name, tenant } = c.req.valid('param');
      return c.json(tenants().unfreeze(name, tenant), 200);
    },
  );
}
