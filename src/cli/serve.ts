import { createScheduler } from '../runs/scheduler.js';
import { watchStopRequests } from '../admin/stop-requests.js';
import { createLiveView } from '../admin/live-view.js';
import { scheduleDispatch } from '../bridges/scheduled-runs.js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { appDepsFrom, createApp } from '../api/app.js';
import { resolveAdminToken } from '../api/auth.js';
import { homePaths } from '../config/home.js';
import { ensureDemoProject, DEMO_PROJECT } from './demo.js';
import { nodeSupport } from '../base/node-support.js';
import { installationId, type Berth } from '../main.js';
import { createToolServer } from '../mcp/server.js';
import { ADMIN_TOOLS } from '../mcp/admin-tools.js';
import { VERSION } from '../base/version.js';
import { BerthError, errnoOf } from '../base/errors.js';
import { claimBridges, startBridges, type BridgeClaim, type RunningBridges } from '../bridges/start.js';
import { createPersonRequests } from '../admin/person-requests.js';
import { approveSender, channelsWithPairing, denySender, pendingSenders } from '../bridges/senders.js';
import { configuredChannels, webChatWords } from '../config/bridges.js';
import { channelNamed, CHANNEL_NAMES } from '../channels/registry.js';
import { createMetricsHistory } from '../admin/metrics-history.js';
import type { ConsoleSenders } from '../api/console/state.js';
import { processIdentity } from '../fs/process-identity.js';
import { attachWebChatSocket } from '../bridges/web-socket.js';

type Out = { out: (s: string) => void; err: (s: string) => void };

/** `berth serve`: the HTTP admin API and /mcp, until SIGINT/SIGTERM. */
export async function runServer(
  berth: Berth,
  opts: { host: string; port: number; demo: boolean; envToken?: string },
  io: Out,
): Promise<number> {
  let token!: ReturnType<typeof resolveAdminToken>;
  const http = await listenHttp(
    berth,
    {
      host: opts.host,
      port: opts.port,
      // Once the port is bound and the bridges claimed: a second berth of this home has failed by now.
      token: async () => {
        token = resolveAdminToken({
          configToken: berth.config.admin_token,
          envToken: opts.envToken,
          file: homePaths(berth.home).adminTokenFile,
        });
        if (opts.demo) ensureDemoProject(berth, io);
        const recovered = await berth.runner.recover();
        if (recovered.removed || recovered.interrupted.length) {
          berth.logger.warn(
            { containers: recovered.removed, interrupted: recovered.interrupted },
            'closed the runs a dead berth left open and removed their containers',
          );
        }
        return token.token;
      },
    },
    io,
  );
  const { url } = http;
  const relay = berth.kubeRelay;
  if (relay) {
    await new Promise<void>((resolve, reject) => relay.server.once('error', reject).listen(relay.port, relay.host, resolve));
    io.out(`kubernetes: pods' relays reach berth on ${relay.host}:${relay.port}\n`);
  }
  io.out(
    `berth ${VERSION} serving ${url}  (API reference: ${url}/docs, OpenAPI: ${url}/openapi.json, MCP: ${url}/mcp, web chat: ${url}/chat, console: ${url}/console, metrics: ${url}/metrics)\n`,
  );
  io.out(`home: ${berth.home}  (projects, berth.yaml and berth's state; --home or BERTH_HOME names another)\n`);
  const node = nodeSupport(process.version, new Date());
  if (!node.ok) {
    // Beside the startup lines for the person who started it, and in the log for whoever reads that.
    io.out(`warning: ${node.detail}\n`);
    berth.logger.warn({ node: process.version }, node.detail);
  }
  if (token.source === 'generated' || opts.demo) {
    io.out(`admin token: ${token.token}${token.file ? `  (stored in ${token.file}, mode 0600)` : ''}\n`);
  } else {
    io.out(`admin token: from ${token.source === 'file' ? token.file : token.source === 'env' ? 'BERTH_ADMIN_TOKEN' : 'berth.yaml'}\n`);
  }
  if (opts.demo) {
    const link = berth.admin.mintChatLink(DEMO_PROJECT, 'alice');
    io.out(
      `web chat as alice (the link works once, until ${link.expires_at}): ${url}${link.path}\n  another person: npx berth chat-link ${DEMO_PROJECT} --user bob --base ${url}\n  in the chat, try: wget -qO- http://example.com  (the agent asks you before it reaches a host the project does not allow)\n`,
    );
    io.out(`try:
  curl -s -H 'Authorization: Bearer ${token.token}' -H 'content-type: application/json' \\
    -d '{"user": "web:alice", "message": "echo hello from $(whoami); ls -la"}' \\
    ${url}/api/projects/${DEMO_PROJECT}/runs
`);
  }
  io.out('ready\n');

  await drainOnSignal(berth, io);
  await http.close();
  relay?.server.close();
  await berth.audit.flush(); // the last minute's count of unauthenticated requests
  return 0;
}

/**
 * Wait for SIGINT or SIGTERM, then drain: no new runs (SHUTTING_DOWN, 503), the runs in flight
 * get runs.drain_seconds to finish, then their containers are stopped and they are journaled as
 * interrupted. A second signal ends the wait at once. The HTTP surface keeps answering meanwhile,
 * so a run that finishes in time still reaches its caller.
 */
async function drainOnSignal(berth: Berth, io: Out): Promise<void> {
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  const seconds = berth.config.runs.drain_seconds;
  const { inFlight, queued } = berth.admission.stats();
  io.out(
    `berth: ${signal}: draining (${inFlight} run(s) in flight, up to ${seconds} s; ${queued} waiting run(s) refused; send it again to stop at once)\n`,
  );
  const now = () =>
    void berth.runner.drain(0).catch((err: unknown) => berth.logger.error({ err: String(err) }, 'stopping the runs in flight failed'));
  process.once('SIGINT', now);
  process.once('SIGTERM', now);
  const { interrupted } = await berth.runner.drain(seconds * 1000);
  process.off('SIGINT', now);
  process.off('SIGTERM', now);
  if (interrupted) io.out(`berth: ${interrupted} run(s) interrupted: their containers were stopped\n`);
}

export interface HttpSurface {
  server: Server;
  url: string;
  bridges: RunningBridges;
  close(): Promise<void>;
}

/** A port berth listens on, before anything answers there (requests meanwhile get 503). */
export interface BoundHttp {
  server: Server;
  url: string;
  handle(fetch: (req: Request, env: unknown) => Response | Promise<Response>): void;
  close(): Promise<void>;
}

/**
 * Listen on host:port with nothing else started: a taken port is ADDRESS_IN_USE at once, one
 * line, before any bridge connects or any recovery or cleanup runs (a second `berth serve` of a
 * home once kept running beside the first, its Signal bridge answering every message again).
 */
export async function bindHttp(opts: { host: string; port: number }): Promise<BoundHttp> {
  let handler: ((req: Request, env: unknown) => Response | Promise<Response>) | undefined;
  const server = createAdaptorServer({
    fetch: (req: Request, env: unknown) =>
      handler ? handler(req, env) : new Response('berth is starting\n', { status: 503, headers: { 'retry-after': '1' } }),
  }) as Server;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
      server.listen(opts.port, opts.host);
    });
  } catch (err) {
    if (errnoOf(err) === 'EADDRINUSE')
      throw new BerthError(
        'ADDRESS_IN_USE',
        `${host}:${opts.port} is in use (another berth serve?): stop it, or pick another port with --port`,
      );
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://${host}:${port}`,
    handle: (fetch) => void (handler = fetch),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * The HTTP surface of a berth, listening: the admin API, /docs, /mcp and the web chat (its
 * page, its API and its WebSocket on the server's upgrade event), with the chat bridges started.
 * `berth serve` and the browser tests run this same wiring.
 */
export async function listenHttp(
  berth: Berth,
  /** token: the admin token, or the step that readies the server and gives it (run once the port is bound and the bridges claimed). */
  opts: { host: string; port: number; token: string | (() => Promise<string>) },
  io: Out,
): Promise<HttpSurface> {
  // The port first, then the bridges' claim: a second berth of this home fails here, before it
  // connects a bridge, recovers or removes anything (ADDRESS_IN_USE, ALREADY_RUNNING).
  const bound = await bindHttp(opts);
  let claim: BridgeClaim | undefined;
  try {
    claim = claimBridges({ config: () => berth.config, stateDir: homePaths(berth.home).stateDir });
    const token = typeof opts.token === 'string' ? opts.token : await opts.token();
    return answerHttp(berth, bound, claim, token, io);
  } catch (err) {
    claim?.release();
    await bound.close();
    throw err;
  }
}

/** On a bound port: start the bridges (under their claim) and answer with the app. */
function answerHttp(berth: Berth, bound: BoundHttp, claim: BridgeClaim, token: string, io: Out): HttpSurface {
  const bridges = startConfiguredBridges(berth, io, { web: true, claim });
  const stateDir = homePaths(berth.home).stateDir;
  // The console's charts: this process's metrics, sampled (the first sample now).
  const history = createMetricsHistory(berth.metrics.registry);
  void history.sample().catch(() => undefined);
  const senders = (): ConsoleSenders | undefined =>
    channelsWithPairing(berth.config).length === 0
      ? undefined
      : {
          pending: () => pendingSenders(berth.config, stateDir),
          approve: (sender) => approveSender({ config: berth.config, stateDir, logger: berth.logger }, sender),
          deny: (sender) => denySender(stateDir, sender),
        };
  const app = createApp({
    ...appDepsFrom(berth, { token, logger: berth.logger, webChat: bridges.web }),
    approvals: berth.approvals,
    senders,
    history,
    live: createLiveView({
      containers: () => berth.launcher.listManaged({ installation: installationId(berth.home) }),
      stats: berth.launcher.stats?.bind(berth.launcher),
      statsMissing: `the ${berth.config.launcher} launcher gives no container figures (no metrics API is asked)`,
      registry: berth.metrics.registry,
      bridges: () => bridges.running(),
    }),
    hooks: (req, path, source) => bridges.hook(req, path, source),
    oidc: () => ({ oidc: berth.config.oidc, publicUrl: berth.config.bridges.public_url }),
  });
  bound.handle((req, env) => app.fetch(req, env as Parameters<typeof app.fetch>[1]));
  const { server } = bound;
  const sockets = bridges.web ? attachWebChatSocket(server, { chat: bridges.web, logger: berth.logger }) : undefined;
  // Schedules fire here, where the chats they answer in run (one berth of a home fires: scheduler.ts).
  const scheduler = createScheduler({
    store: berth.scheduleStore,
    stateDir,
    logger: berth.logger,
    everyMs: () => berth.config.schedules.tick_seconds * 1000,
    dispatch: scheduleDispatch({ bridges: () => bridges, admin: berth.admin, store: berth.scheduleStore, logger: berth.logger }),
  });
  scheduler.start();
  return {
    server,
    url: bound.url,
    bridges,
    async close() {
      history.stop();
      void scheduler.stop();
      sockets?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Idle keep-alive connections must not hold the shutdown; an answer being written gets a moment.
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 1000).unref();
      });
      await bridges.stop();
    },
  };
}

/** How often a running berth looks at berth.yaml's bridges (a bridge added, removed or pointed elsewhere). */
export const BRIDGES_RECHECK_MS = 2000;

/**
 * The chat bridges berth.yaml configures (and the web chat, when serving HTTP); a message
 * journaled by a dead berth is answered now. berth.yaml's bridges are followed while it runs.
 */
function startConfiguredBridges(berth: Berth, io: Out, opts: { web?: boolean; claim: BridgeClaim; only?: string }): RunningBridges {
  const bridges = startBridges({
    admin: berth.admin,
    config: () => berth.config,
    logger: berth.logger,
    stateDir: homePaths(berth.home).stateDir,
    owner: processIdentity(),
    web: opts.web,
    claim: opts.claim,
    approvals: berth.approvals,
    metrics: berth.metrics,
    only: opts.only,
    schedules: berth.schedules,
    person: {
      requests: createPersonRequests({
        tenants: () => berth.tenants,
        store: berth.store,
        config: () => berth.config,
        approvals: berth.approvals,
      }),
      publicUrl: () => berth.config.bridges.public_url,
    },
  });
  if (bridges.web) io.out(`web bridge: ${webChatWords(berth.config.bridges)}\n`);
  for (const { channel, config } of configuredChannels(berth.config.bridges)) {
    if (opts.only === undefined || opts.only === channel.name) io.out(`${channel.name} bridge: ${channel.describe(config)}\n`);
  }
  const recheck = setInterval(() => {
    let changed: string | undefined;
    try {
      changed = bridges.reconfigure();
    } catch (err) {
      // Following berth.yaml is housekeeping: whatever it meets, the server and the running bridges go on.
      berth.logger.error({ err: String((err as Error).message).slice(0, 300) }, 'berth.yaml changed, but the bridges could not follow it');
      return;
    }
    if (!changed) return;
    berth.logger.info({ change: changed }, 'berth.yaml changed: bridges followed');
    io.out(`berth: berth.yaml changed: ${changed}\n`);
  }, BRIDGES_RECHECK_MS);
  recheck.unref();
  // A run of this process stopped from another one of the home (berth runs stop, a second serve's console).
  const stopWatch = watchStopRequests(homePaths(berth.home).stateDir, (_project, run, reason) => berth.runner.stop(run, reason));
  const stop = bridges.stop.bind(bridges);
  return Object.assign(bridges, {
    async stop() {
      clearInterval(recheck);
      stopWatch();
      await stop();
    },
  });
}

/** `berth bridge <name>`: only that chat channel (no HTTP), until SIGINT/SIGTERM. */
export async function runBridgesOnly(berth: Berth, io: Out, name: string): Promise<number> {
  const channel = channelNamed(name);
  if (!channel) throw new BerthError('USAGE', `no bridge is named "${name}" (there are: ${CHANNEL_NAMES.join(', ')})`);
  const configured = configuredChannels(berth.config.bridges).find((c) => c.channel.name === name);
  if (!configured) {
    io.err(`berth: the ${name} bridge is not configured: add bridges.${name} to berth.yaml (see ${channel.guide})\n`);
    return 2;
  }
  if (configured.channel.receives(configured.config) === 'http') {
    throw new BerthError(
      'USAGE',
      `the ${name} bridge is sent its messages by HTTP: "berth serve" answers them at /hooks/, not "berth bridge ${name}"`,
    );
  }
  // Claimed before anything else: beside a live consumer of this home it refuses (ALREADY_RUNNING).
  const claim = claimBridges({ config: () => berth.config, stateDir: homePaths(berth.home).stateDir, only: name });
  let bridges: RunningBridges;
  try {
    await berth.runner.recover();
    bridges = startConfiguredBridges(berth, io, { claim, only: name });
  } catch (err) {
    claim.release();
    throw err;
  }
  io.out('ready\n');
  await drainOnSignal(berth, io);
  await bridges.stop();
  return 0;
}

/** `berth mcp`: the admin tools over stdio, until stdin closes. */
export async function runStdioMcp(berth: Berth): Promise<number> {
  const server = createToolServer('berth', ADMIN_TOOLS, () => ({ admin: berth.admin, operator: berth.operator }));
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
  });
  await server.connect(transport);
  await closed;
  return 0;
}
