import type { Context, Hono, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import type { AuditTrail } from '../../admin/audit-trail.js';
import { parseOrThrow } from '../../config/parse.js';
import { BerthError } from '../../base/errors.js';
import { PermissionLevelSchema } from '../../config/session.js';
import { ChatUserSchema } from '../../store/chat-links.js';
import { PAUSE_REASON_MAX } from '../../store/project-pause.js';
import { TenantKeySchema } from '../../store/workspaces.js';
import { runWithAudit } from '../routes/control.js';
import type { ConsoleSources } from './state.js';

/**
 * The console's views of one run, session or tenant, and its actions: stop a run, pause and
 * resume a project, set a session's level, delete a session, revoke a person's chat logins, lift
 * a tenant's freeze (a decoy credential was used). Opening a session (its transcript) is audited. Each
 * action is the admin service's (audited; the same as the API route and the CLI command), asked
 * with a JSON body from the console page itself (`act` checks origin, type and canAct).
 */
const Empty = z.object({}).strict();
const PauseBody = z.object({ reason: z.string().max(PAUSE_REASON_MAX).optional() }).strict();
const LevelBody = z.object({ level: PermissionLevelSchema }).strict();
const RevokeBody = z.object({ user: ChatUserSchema }).strict();

/** A project, run or session named in a console path: bounded, and as the stores spell them (they check the rest). */
const Name = z.string().min(1).max(64);
const Id = z.string().min(1).max(128);

export interface ConsoleActionDeps {
  sources: ConsoleSources;
  audit?: AuditTrail;
  /** Signed in (else UNAUTHORIZED). */
  viewer: (c: Context) => void;
  /** The body of an action: from this origin, JSON, signed in and allowed to act (canAct). */
  act: <S extends z.ZodType>(c: Context, schema: S) => Promise<z.output<S>>;
  limit: MiddlewareHandler;
}

export function registerConsoleActions(app: Hono, deps: ConsoleActionDeps): void {
  const admin = () => deps.sources.admin();
  const param = (c: Context, name: string, schema: z.ZodType<string> = Name) => parseOrThrow(schema, c.req.param(name), name);

  app.get('/console/api/runs/:project/:run', (c) => {
    deps.viewer(c);
    return c.json(runWithAudit(admin(), deps.audit, param(c, 'project'), param(c, 'run', Id)));
  });
  app.get('/console/api/sessions/:project/:session', (c) => {
    deps.viewer(c);
    const detail = admin().sessionDetail(param(c, 'project'), param(c, 'session', Id));
    // A person's conversation read by an operator is on the record: who (the caller's actor), whose, which; never what.
    deps.audit?.record({
      kind: 'admin',
      action: 'transcript.open',
      project: detail.project,
      target: `${detail.session.tenant_key} session ${detail.session.id}`,
      outcome: 'ok',
    });
    return c.json(detail);
  });
  app.get('/console/api/tenants/:project/:tenant', (c) => {
    deps.viewer(c);
    const project = param(c, 'project');
    const tenant = param(c, 'tenant', TenantKeySchema);
    const detail = admin().tenantDetail(project, tenant);
    // A web chat person's links and logins (a tenant "web:<user>"), and what waits for them.
    const user = tenant.startsWith('web:') ? tenant.slice(4) : undefined;
    const access = user !== undefined && ChatUserSchema.safeParse(user).success ? admin().listChatAccess(project, user) : null;
    const waiting = (deps.sources.approvals?.pending() ?? []).filter((a) => a.project === project && a.tenant === tenant);
    const pairing =
      deps.sources
        .senders?.()
        ?.pending()
        .find((s) => s.sender === tenant) ?? null;
    return c.json({ ...detail, chat_user: user ?? null, access, waiting, pairing });
  });

  app.post('/console/api/runs/:project/:run/stop', deps.limit, async (c) => {
    await deps.act(c, Empty);
    return c.json(admin().stopRun(param(c, 'project'), param(c, 'run', Id), 'the operator stopped it (console)'));
  });
  app.post('/console/api/projects/:project/pause', deps.limit, async (c) => {
    const { reason } = await deps.act(c, PauseBody);
    return c.json(admin().pauseProject(param(c, 'project'), reason || undefined));
  });
  app.post('/console/api/projects/:project/resume', deps.limit, async (c) => {
    await deps.act(c, Empty);
    return c.json(admin().resumeProject(param(c, 'project')));
  });
  app.post('/console/api/sessions/:project/:session/level', deps.limit, async (c) => {
    const { level } = await deps.act(c, LevelBody);
    const s = admin().updateSession(param(c, 'project'), param(c, 'session', Id), { permission_level: level });
    return c.json({ session: s.id, level: s.settings.permission_level });
  });
  app.post('/console/api/sessions/:project/:session/end', deps.limit, async (c) => {
    await deps.act(c, Empty);
    return c.json(await admin().endSession(param(c, 'project'), param(c, 'session', Id)));
  });
  app.post('/console/api/sessions/:project/:session/delete', deps.limit, async (c) => {
    await deps.act(c, Empty);
    return c.json(admin().deleteSession(param(c, 'project'), param(c, 'session', Id)));
  });
  app.post('/console/api/tenants/:project/:tenant/unfreeze', deps.limit, async (c) => {
    await deps.act(c, Empty);
    if (!deps.sources.tenants) throw new BerthError('NOT_FOUND', 'this berth serves no tenant data here');
    return c.json(deps.sources.tenants().unfreeze(param(c, 'project'), param(c, 'tenant', TenantKeySchema)));
  });
  app.post('/console/api/projects/:project/chat-logins/revoke', deps.limit, async (c) => {
    const { user } = await deps.act(c, RevokeBody);
    return c.json(admin().revokeChatUser(param(c, 'project'), user));
  });
}
