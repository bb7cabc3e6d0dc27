import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { createHoneytokens } from '../../src/outbound/honeytokens.js';
import { decoyPlacement, decoysOf } from '../../src/plan/honeytokens.js';
import { openDecoyHolders } from '../../src/store/decoy-holders.js';
import { openFrozenTenants } from '../../src/store/frozen-tenants.js';
import { until } from '../helpers/until.js';

/**
 * berth's own API as a tripwire (api/decoy-tripwire.ts → checkAny): a request names no tenant, so
 * every decoy berth planted is looked for, whoever holds it, from the moment it is planted, and
 * nothing is made again while a request waits.
 */
const secret = Buffer.alloc(32, 9);
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function make(opts: { state?: string; tenantsOf?: (project: string) => string[]; now?: () => number } = {}) {
  const state = opts.state ?? fs.mkdtempSync(join(os.tmpdir(), 'berth-honey-api-'));
  if (!opts.state) dirs.push(state);
  let config = BerthConfigSchema.parse({ projects: { p: { honeytokens: true }, q: { honeytokens: true } } });
  let secretReads = 0;
  const wire = createHoneytokens({
    config: () => config,
    secret: () => (secretReads++, secret),
    frozen: openFrozenTenants(state),
    holders: openDecoyHolders(state),
    logger: pino({ level: 'silent' }),
    ...(opts.tenantsOf ? { tenantsOf: opts.tenantsOf } : {}),
    ...(opts.now ? { now: opts.now } : {}),
  });
  return {
    wire,
    state,
    secretReads: () => secretReads,
    switchOff: (project: string) =>
      (config = BerthConfigSchema.parse({ projects: { ...config.projects, [project]: { honeytokens: false } } })),
  };
}

const b64 = (s: string, form: 'base64' | 'base64url' = 'base64') => Buffer.from(s).toString(form);
const files = (project: string, tenant: string) =>
  Object.fromEntries(decoyPlacement(decoysOf(secret, project, tenant)).files.map((f) => [f.path.join('/'), f.content]));

describe("berth's API finds every decoy berth plants", () => {
  const d = decoysOf(secret, 'p', 'web:alice');
  const sshLine = d.sshPrivateKey.split('\n')[2]!;
  const cases: Array<[string, string]> = [
    ['the AWS key id in a signed request header', `AWS4-HMAC-SHA256 Credential=${d.awsAccessKeyId}/20260101/us-east-1/s3/aws4_request`],
    ['the AWS secret in a JSON body', JSON.stringify({ key: d.awsSecretAccessKey })],
    ['the SSH key file, JSON-quoted', JSON.stringify({ note: files('p', 'web:alice')['.ssh/id_ed25519'] })],
    ['one line of the SSH key', `see: ${sshLine}`],
    ['~/.aws/credentials in base64', JSON.stringify({ note: b64(files('p', 'web:alice')['.aws/credentials']!) })],
    ['the SSH key file in base64', `data=${b64(d.sshPrivateKey)}`],
    ['the SSH key file in URL-safe base64', `/api/x?k=${b64(d.sshPrivateKey, 'base64url')}`],
  ];
  it.each(cases)('%s', (_what, text) => {
    const { wire } = make({ tenantsOf: () => ['web:alice'] });
    expect(wire.checkAny('api POST /api/x', 'nothing here', text)).toEqual({ project: 'p', tenantKey: 'web:alice' });
  });

  it('nothing when the text carries none (another secret, a decoy cut short, another project of the same tenant)', () => {
    const { wire } = make({ tenantsOf: () => ['web:alice'] });
    expect(wire.checkAny('api GET /', `Bearer ${decoysOf(secret, 'p', 'web:zed').awsSecretAccessKey}`)).toBeUndefined();
    expect(wire.checkAny('api GET /', d.awsSecretAccessKey.slice(0, 19), sshLine.slice(0, 19))).toBeUndefined();
    expect(wire.checkAny('api GET /', decoysOf(secret, 'other', 'web:alice').awsAccessKeyId)).toBeUndefined();
  });
});

describe('whose decoys are looked for, and when the list changes', () => {
  it('a tenant is looked for from the moment its decoys are planted, with no session; a request remakes nothing', () => {
    let asked = 0;
    let clock = 1_000_000;
    const { wire, secretReads } = make({ tenantsOf: () => (asked++, []), now: () => clock });
    expect(wire.checkAny('api GET /', 'nothing yet')).toBeUndefined();
    const carol = wire.decoysFor('p', 'web:carol')!; // as the runner plants them
    expect(wire.checkAny('api GET /', `Bearer ${carol.awsSecretAccessKey}`)).toEqual({ project: 'p', tenantKey: 'web:carol' });
    // Long after: requests are only looked at, the list is not made again.
    const [askedBefore, readsBefore] = [asked, secretReads()];
    clock += 10 * 60_000;
    expect(wire.checkAny('api GET /', 'AKIA0000000000000000', `Bearer ${carol.awsAccessKeyId}`)).toMatchObject({ tenantKey: 'web:carol' });
    expect([asked, secretReads()]).toEqual([askedBefore, readsBefore]);
  });

  it('tenants with a session from before berth kept the list are looked for, and added to it', () => {
    const { wire, state } = make({ tenantsOf: (project) => (project === 'p' ? ['web:old', 'web:old'] : []) });
    expect(wire.checkAny('api GET /', decoysOf(secret, 'p', 'web:old').awsAccessKeyId)).toMatchObject({ tenantKey: 'web:old' });
    expect(openDecoyHolders(state).list()).toEqual([expect.objectContaining({ project: 'p', tenant: 'web:old' })]);
  });

  it("another berth process of the home plants and forgets a tenant's decoys: this one's API follows, without a request remaking anything", async () => {
    const served = make();
    const other = make({ state: served.state });
    expect(served.wire.checkAny('api GET /', 'started')).toBeUndefined();
    const dan = other.wire.decoysFor('q', 'web:dan')!;
    const carried = `Bearer ${dan.awsAccessKeyId}`;
    expect(await until(() => served.wire.checkAny('api GET /', carried), "dan's decoy looked for")).toEqual({
      project: 'q',
      tenantKey: 'web:dan',
    });
    openDecoyHolders(served.state).remove('q', 'web:dan'); // as forgetting the tenant does
    await until(() => served.wire.checkAny('api GET /', carried) === undefined, "dan's decoy no longer looked for");
  });

  it('a project whose decoys were switched off is not looked for; the others still are', () => {
    const { wire, switchOff } = make();
    const erin = wire.decoysFor('p', 'web:erin')!;
    const fay = wire.decoysFor('q', 'web:fay')!;
    switchOff('p');
    expect(wire.checkAny('api GET /', erin.awsSecretAccessKey, fay.awsSecretAccessKey)).toEqual({ project: 'q', tenantKey: 'web:fay' });
    expect(wire.checkAny('api GET /', erin.awsSecretAccessKey)).toBeUndefined();
  });
});
