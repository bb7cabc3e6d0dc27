import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { isBerthError } from '../../src/base/errors.js';
import { createHoneytokens } from '../../src/outbound/honeytokens.js';
import { decoyNeedles, decoyPlacement, decoysOf } from '../../src/plan/honeytokens.js';
import { openDecoyHolders } from '../../src/store/decoy-holders.js';
import { openFrozenTenants } from '../../src/store/frozen-tenants.js';
import { plantInHome } from '../../src/store/agent-homes.js';

const secret = Buffer.alloc(32, 7);
const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-honey-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('decoy credentials (plan/honeytokens.ts)', () => {
  it("are each tenant's own, stable, and shaped like the real ones", () => {
    const a = decoysOf(secret, 'p', 'web:alice');
    expect(decoysOf(secret, 'p', 'web:alice')).toEqual(a);
    const b = decoysOf(secret, 'p', 'web:bob');
    expect(b.awsSecretAccessKey).not.toBe(a.awsSecretAccessKey);
    expect(decoysOf(secret, 'q', 'web:alice').awsAccessKeyId).not.toBe(a.awsAccessKeyId);
    expect(a.awsAccessKeyId).toMatch(/^AKIA[A-Z2-7]{16}$/);
    expect(a.awsSecretAccessKey).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(a.sshPrivateKey).toMatch(/^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n-----END OPENSSH PRIVATE KEY-----\n$/);
    expect(decoyNeedles(a)).toHaveLength(4);
    const placed = decoyPlacement(a);
    expect(placed.env.AWS_SECRET_ACCESS_KEY).toBe(a.awsSecretAccessKey);
    expect(placed.files.map((f) => f.path.join('/'))).toEqual(['.aws/credentials', '.ssh/id_ed25519']);
  });

  it('are put in a home without following a link the tenant left, and a file already there is left alone', () => {
    const home = tmp();
    const elsewhere = tmp();
    fs.symlinkSync(elsewhere, join(home, '.aws'));
    fs.mkdirSync(join(home, '.ssh'));
    fs.writeFileSync(join(home, '.ssh', 'id_ed25519'), 'mine');
    plantInHome(home, decoyPlacement(decoysOf(secret, 'p', 't')).files);
    expect(fs.readdirSync(elsewhere)).toEqual([]);
    expect(fs.lstatSync(join(home, '.aws')).isDirectory()).toBe(true);
    expect(fs.readFileSync(join(home, '.aws', 'credentials'), 'utf8')).toContain('aws_access_key_id = AKIA');
    expect(fs.readFileSync(join(home, '.ssh', 'id_ed25519'), 'utf8')).toBe('mine');
  });
});

describe('the tripwire (outbound/honeytokens.ts)', () => {
  const make = (on: boolean) => {
    const state = tmp();
    const audits: unknown[] = [];
    const config = BerthConfigSchema.parse({ projects: { p: { honeytokens: on } } });
    const wire = createHoneytokens({
      config: () => config,
      secret: () => secret,
      frozen: openFrozenTenants(state),
      holders: openDecoyHolders(state),
      logger: pino({ level: 'silent' }),
      audit: (e) => audits.push(e),
    });
    return { wire, audits };
  };
  const alice = { project: 'p', tenantKey: 'web:alice', runId: 'r1' };
  const key = decoysOf(secret, 'p', 'web:alice').awsSecretAccessKey;

  it('trips on the decoy in any form secrets are looked for in, freezes the tenant once, and refuses its runs in words', () => {
    const { wire, audits } = make(true);
    expect(wire.check(alice, 'egress GET x', 'nothing here', 'GET /?q=AKIA')).toBe(false);
    expect(wire.check(alice, 'model call', JSON.stringify({ content: Buffer.from(`key=${key}`).toString('base64') }))).toBe(true);
    expect(wire.check(alice, 'egress POST x', `x=${encodeURIComponent(key)}`)).toBe(true);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ kind: 'sandbox_violation', action: 'honeytoken.hit', actor: 'tenant:web:alice', project: 'p' });
    let err: unknown;
    try {
      wire.assertNotFrozen('p', 'web:alice');
    } catch (e) {
      err = e;
    }
    expect(isBerthError(err) && err.code === 'PERMISSION_DENIED' && err.details.rule === 'honeytoken').toBe(true);
    expect(() => wire.assertNotFrozen('p', 'web:bob')).not.toThrow();
  });

  it("another tenant's decoy is not this tenant's use, and a project without honeytokens carries none", () => {
    const { wire } = make(true);
    expect(wire.check({ ...alice, tenantKey: 'web:bob' }, 'model call', key)).toBe(false);
    const off = make(false);
    expect(off.wire.decoysFor('p', 'web:alice')).toBeUndefined();
    expect(off.wire.check(alice, 'model call', key)).toBe(false);
  });
});
