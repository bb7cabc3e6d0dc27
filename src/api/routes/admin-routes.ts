import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AdminService } from '../../admin/service.js';
import type { AuditTrail } from '../../admin/audit-trail.js';
import type { ConsoleSenders } from '../console/state.js';
import { registerAuditRoutes } from './audit.js';
import { registerChatLinkRoutes } from './chat-links.js';
import { registerControlRoutes, registerViewRoutes } from './control.js';
import { registerProjectRoutes } from './projects.js';
import { registerSessionRoutes } from './sessions.js';
import { registerStrangerRoutes } from './strangers.js';
import { registerTenantDataRoutes } from './tenant-data.js';
import type { TenantData } from '../../admin/tenant-data.js';

/** The admin token's routes over projects, sessions, chat access, the operator's actions and the audit log. */
export function registerAdminRoutes(
  app: OpenAPIHono,
  deps: { admin: () => AdminService; audit?: AuditTrail; senders?: () => ConsoleSenders | undefined; tenants?: () => TenantData },
): void {
  registerProjectRoutes(app, deps.admin);
  registerControlRoutes(app, deps);
  registerViewRoutes(app, deps);
  registerSessionRoutes(app, deps.admin);
  registerChatLinkRoutes(app, deps.admin);
  registerStrangerRoutes(app, deps);
  registerAuditRoutes(app, () => deps.audit);
  if (deps.tenants) registerTenantDataRoutes(app, deps.tenants);
}
