import { createHmac } from 'node:crypto';

/**
 * Decoy credentials a container can carry (berth.yaml projects.<p>.honeytokens): an AWS key pair
 * in the environment and in ~/.aws/credentials, and an SSH key in ~/.ssh. Nothing real accepts
 * them, so any use of one (a request carrying it, a model prompt quoting it) means something in
 * the container went looking for credentials and is trying to use or send them.
 *
 * Each tenant of each project has its own, derived from berth's secret (stable across runs and
 * restarts, so a copy taken in an earlier run still trips, and nothing needs storing); they have
 * the real formats' shapes and 128+ bits of their own, so they never equal a real secret.
 */
export interface Decoys {
  awsAccessKeyId: string;
  awsSecretAccessKey: string;
  sshPrivateKey: string;
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function stream(key: Buffer, label: string, bytes: number): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; Buffer.concat(out).length < bytes; i++) out.push(createHmac('sha256', key).update(`${label}\0${i}`).digest());
  return Buffer.concat(out).subarray(0, bytes);
}
const spell = (raw: Buffer, alphabet: string) => [...raw].map((b) => alphabet[b % alphabet.length]).join('');

export function decoysOf(secret: Buffer, project: string, tenant: string): Decoys {
  const key = createHmac('sha256', secret).update(`berth honeytokens\0${project}\0${tenant}`).digest();
  const body = stream(key, 'ssh', 200).toString('base64');
  return {
    awsAccessKeyId: `AKIA${spell(stream(key, 'aws-id', 16), BASE32)}`,
    awsSecretAccessKey: spell(stream(key, 'aws-secret', 40), ALNUM),
    sshPrivateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${body.match(/.{1,70}/g)?.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`,
  };
}

/** The values whose appearance in a request trips the wire: each secret part, never a header line alone. */
export function decoyNeedles(d: Decoys): string[] {
  const sshLines = d.sshPrivateKey.split('\n').filter((l) => l.length >= 60 && !l.startsWith('-----'));
  return [d.awsAccessKeyId, d.awsSecretAccessKey, ...sshLines.slice(0, 2)];
}

/** Where they are put: environment variables, and files below the agent's home (HOME). */
export function decoyPlacement(d: Decoys): {
  env: Record<string, string>;
  files: Array<{ path: string[]; content: string; mode: number }>;
} {
  return {
    env: { AWS_ACCESS_KEY_ID: d.awsAccessKeyId, AWS_SECRET_ACCESS_KEY: d.awsSecretAccessKey, AWS_DEFAULT_REGION: 'eu-central-1' },
    files: [
      {
        path: ['.aws', 'credentials'],
        content: `[default]\naws_access_key_id = ${d.awsAccessKeyId}\naws_secret_access_key = ${d.awsSecretAccessKey}\n`,
        mode: 0o600,
      },
      { path: ['.ssh', 'id_ed25519'], content: d.sshPrivateKey, mode: 0o600 },
    ],
  };
}
