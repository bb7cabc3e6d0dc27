import type { RunView } from '../../src/admin/views.js';
import type { CoreAdmin } from '../../src/bridges/core.js';
import type { SessionRecord } from '../../src/config/session.js';

/**
 * A typed stand-in for what the bridge core asks of the admin service (`CoreAdmin`): a test gives
 * the methods it uses, each checked against the service's own signature; any other one throws,
 * naming itself, so a core that starts asking for more shows here instead of hiding behind a cast.
 */
export function fakeCoreAdmin(methods: Partial<CoreAdmin>): CoreAdmin {
  const missing = (name: keyof CoreAdmin) => (): never => {
    throw new Error(`the test's admin service has no ${name}`);
  };
  return {
    getProjectMetadata: missing('getProjectMetadata'),
    updateProject: missing('updateProject'),
    getSession: missing('getSession'),
    openSession: missing('openSession'),
    updateSession: missing('updateSession'),
    listRuns: missing('listRuns'),
    runMessage: missing('runMessage'),
    runWorkflow: missing('runWorkflow'),
    runFile: missing('runFile'),
    restoreSession: missing('restoreSession'),
    sessionCheckpoints: missing('sessionCheckpoints'),
    forkSession: missing('forkSession'),
    ...methods,
  };
}

/** A finished run's view: exit 0, no output, unless told. */
export function runViewOf(over: Partial<RunView> = {}): RunView {
  return {
    run: 'r1',
    project: 'p',
    session: 's',
    permission_level: 'medium',
    workspace: 'w',
    exit_code: 0,
    stdout: '',
    stderr: '',
    truncated: false,
    timed_out: false,
    timings_ms: { create: 0, start: 0, run: 0, total: 0 },
    warm: false,
    warnings: [],
    ...over,
  };
}

/** A session record of `tenant`, at the default level. */
export function sessionOf(id: string, tenant: string): SessionRecord {
  const at = '2026-01-01T00:00:00.000Z';
  return {
    id,
    project: 'p',
    tenant_key: tenant,
    created_at: at,
    updated_at: at,
    runs: 0,
    settings: { permission_level: 'medium', workspace: { mode: 'tenant', root_dir: '/workspace' } },
  };
}
