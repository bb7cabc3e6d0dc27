import { createHmac, randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import YAML from 'yaml';
import { until } from './until.js';

/**
 * A real Matrix homeserver for a test file: Debian sid's Synapse (1.160) in the local image
 * scripts/ensure-synapse.sh builds once (make test does; nothing can be pulled here). One
 * container per file, started with dockerode (testcontainers' reaper image cannot be pulled):
 * SQLite, one client listener (client and media resources) published on 127.0.0.1 only, no
 * federation, presence off; the bot under Synapse's default message rate limit, the people without
 * one, the other limits loose enough for a test's bursts. Users are registered
 * through the shared-secret admin API (what `register_new_matrix_user` calls), which answers with
 * their access tokens. Labelled `berth.test=synapse`: a container whose test process died is
 * removed by the next start; `stop()` removes its own.
 */
export const SYNAPSE_IMAGE = 'berth-test-synapse:r1'; // scripts/ensure-synapse.sh names the same tag
export const SERVER_NAME = 'localhost';
const PORT = 8008;
/** The media repository's upload limit, in MiB (Synapse's default is 50). */
export const MAX_UPLOAD_MIB = 1;
const LABEL = 'berth.test';
const OWNER = 'berth.test.pid';

export type Person = 'berth' | 'alice' | 'bob' | 'carol';
export interface MatrixUser {
  userId: string;
  token: string;
}

export interface Synapse {
  /** The client-server API's base, http://127.0.0.1:<port>. */
  url: string;
  users: Record<Person, MatrixUser>;
  /** Synapse's own log (its stderr), to explain a failure. */
  logs(): Promise<string>;
  stop(): Promise<void>;
}

/** Synapse's signing key file: "ed25519 <version> <unpadded base64 seed>" (signedjson's format). */
const signingKey = () => `ed25519 a_${randomBytes(3).toString('hex')} ${randomBytes(32).toString('base64').replace(/=+$/, '')}\n`;

const loose = (perSecond: number, burst: number) => ({ per_second: perSecond, burst_count: burst });

/** homeserver.yaml for one test file (Synapse's "Configuration manual"). */
export function homeserverConfig(sharedSecret: string): string {
  return YAML.stringify({
    server_name: SERVER_NAME,
    public_baseurl: `http://${SERVER_NAME}:${PORT}/`,
    pid_file: '/data/homeserver.pid',
    report_stats: false,
    listeners: [
      {
        port: PORT,
        bind_addresses: ['0.0.0.0'],
        type: 'http',
        tls: false,
        x_forwarded: false,
        resources: [{ names: ['client', 'media'] }],
      },
    ],
    database: { name: 'sqlite3', args: { database: '/data/homeserver.db' } },
    media_store_path: '/data/media_store',
    signing_key_path: '/data/signing.key',
    registration_shared_secret: sharedSecret,
    enable_registration: false,
    macaroon_secret_key: randomBytes(24).toString('hex'),
    form_secret: randomBytes(24).toString('hex'),
    trusted_key_servers: [],
    suppress_key_server_warning: true,
    federation_domain_whitelist: [],
    presence: { enabled: false },
    url_preview_enabled: false,
    // Small, so a test can pass it: berth reads it from /_matrix/client/v1/media/config (m.upload.size).
    max_upload_size: `${MAX_UPLOAD_MIB}M`,
    // rc_message stays Synapse's default (0.2/s, burst 10): berth's sends meet it as a real bot does.
    // The people are exempted one by one (startSynapse) so a test's burst of 15 is not refused.
    rc_registration: loose(1000, 1000),
    rc_login: { address: loose(1000, 1000), account: loose(1000, 1000), failed_attempts: loose(1000, 1000) },
    rc_joins: { local: loose(1000, 1000), remote: loose(1000, 1000) },
    rc_invites: { per_room: loose(1000, 1000), per_user: loose(1000, 1000), per_issuer: loose(1000, 1000) },
    rc_media_create: loose(1000, 1000),
  });
}

/** The image, or a failure that says how to build it (never a skip). */
async function ensureImage(docker: Docker): Promise<void> {
  try {
    await docker.getImage(SYNAPSE_IMAGE).inspect();
  } catch {
    throw new Error(
      `The Synapse test image ${SYNAPSE_IMAGE} is missing: build it with scripts/ensure-synapse.sh (make test does; about 20 minutes the first time, cached after).`,
    );
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Containers of test processes that died without stopping theirs. */
async function removeOrphans(docker: Docker): Promise<void> {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL}=synapse`] } })) {
    const pid = Number(c.Labels[OWNER]);
    if (Number.isInteger(pid) && pid > 0 && !alive(pid))
      await docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined);
  }
}

/** A container log without a TTY, as the engine frames it: an 8-byte header (stream, 0, 0, 0, length) before each chunk. */
function demux(framed: Buffer): string {
  const out: Buffer[] = [];
  for (let at = 0; at + 8 <= framed.length;) {
    const length = framed.readUInt32BE(at + 4);
    out.push(framed.subarray(at + 8, at + 8 + length));
    at += 8 + length;
  }
  return Buffer.concat(out).toString('utf8');
}

/** Register a user through the shared-secret admin API (Synapse's "Shared-Secret Registration"): its access token. */
export async function registerUser(url: string, sharedSecret: string, name: string, admin = false): Promise<MatrixUser> {
  const endpoint = `${url}/_synapse/admin/v1/register`;
  const { nonce } = (await (await fetch(endpoint)).json()) as { nonce: string };
  const password = randomBytes(12).toString('hex');
  const mac = createHmac('sha1', sharedSecret)
    .update([nonce, name, password, admin ? 'admin' : 'notadmin'].join('\0'))
    .digest('hex');
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ nonce, username: name, password, admin, mac }),
  });
  const body = (await res.json()) as { user_id?: string; access_token?: string; error?: string };
  if (!res.ok || !body.user_id || !body.access_token)
    throw new Error(`registering ${name} on Synapse: ${res.status} ${JSON.stringify(body)}`);
  return { userId: body.user_id, token: body.access_token };
}

/** No message rate limit for a person (Synapse's admin API "Override ratelimiting for users": 0 is none). */
async function unlimited(url: string, adminToken: string, userId: string): Promise<void> {
  const res = await fetch(`${url}/_synapse/admin/v1/users/${encodeURIComponent(userId)}/override_ratelimit`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages_per_second: 0, burst_count: 0 }),
  });
  if (!res.ok) throw new Error(`Synapse: lifting ${userId}'s rate limit: ${res.status} ${await res.text()}`);
}

export async function startSynapse(): Promise<Synapse> {
  const docker = new Docker();
  await ensureImage(docker);
  await removeOrphans(docker);
  const sharedSecret = randomBytes(24).toString('hex');
  // The config goes in by environment and is written by the container's own shell from there: never pasted into a command.
  const container = await docker.createContainer({
    Image: SYNAPSE_IMAGE,
    Env: [`HS_CONFIG=${homeserverConfig(sharedSecret)}`, `HS_KEY=${signingKey()}`],
    Cmd: [
      'sh',
      '-c',
      'printf %s "$HS_CONFIG" > /data/homeserver.yaml && printf %s "$HS_KEY" > /data/signing.key && unset HS_CONFIG HS_KEY && exec python3 -m synapse.app.homeserver --config-path /data/homeserver.yaml',
    ],
    Labels: { [LABEL]: 'synapse', [OWNER]: String(process.pid) },
    ExposedPorts: { [`${PORT}/tcp`]: {} },
    HostConfig: {
      PortBindings: { [`${PORT}/tcp`]: [{ HostIp: '127.0.0.1', HostPort: '' }] },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Memory: 1024 * 1024 * 1024,
    },
  });
  const logs = async () => demux(await container.logs({ stdout: true, stderr: true }));
  const stop = () => container.remove({ force: true }).then(() => undefined);
  try {
    await container.start();
    const info = await container.inspect();
    const hostPort = info.NetworkSettings.Ports[`${PORT}/tcp`]?.[0]?.HostPort;
    if (!hostPort) throw new Error('Synapse: the engine published no port');
    const url = `http://127.0.0.1:${hostPort}`;
    await until(
      async () => {
        const state = (await container.inspect()).State;
        if (!state.Running) throw new Error(`Synapse exited (${state.ExitCode}):\n${await logs()}`);
        return (await fetch(`${url}/health`).catch(() => undefined))?.ok;
      },
      'Synapse to answer /health',
      90_000,
    );
    const users = {} as Record<Person, MatrixUser>;
    for (const name of ['berth', 'alice', 'bob', 'carol'] as const) users[name] = await registerUser(url, sharedSecret, name);
    const root = await registerUser(url, sharedSecret, 'root', true);
    for (const name of ['alice', 'bob', 'carol'] as const) await unlimited(url, root.token, users[name].userId);
    return { url, users, logs, stop };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
