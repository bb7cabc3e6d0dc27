import { describe, expect, it } from 'vitest';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { parseOrThrow } from '../../src/config/parse.js';
import { admissionLimitsOf, defaultAdmissionLimits } from '../../src/config/runs.js';
import { BerthError, isBerthError } from '../../src/base/errors.js';
import { createAdmission, type AdmissionKey, type AdmissionLimits, type AdmissionStats, type Ticket } from '../../src/runs/admission.js';

const GiB = 1024 ** 3;

/** An admission with a hand-moved clock and limits the test can change between decisions. */
function setup(initial: Partial<AdmissionLimits> = {}) {
  const limits: AdmissionLimits = { global: 10, perProject: 10, perTenant: 10, queue: 100, ...initial };
  const clock = { now: 1_000_000 };
  const changes: AdmissionStats[] = [];
  const admission = createAdmission({ limits: () => limits, now: () => clock.now, onChange: (s) => changes.push(s) });
  /** Admissions in the order they happened, by label. */
  const admitted: string[] = [];
  const enter = (label: string, key: AdmissionKey) => {
    const ticket = admission.enter(key);
    const settled = { ticket, label, state: 'waiting' as 'waiting' | 'admitted' | 'rejected', error: undefined as unknown };
    ticket.ready.then(
      () => {
        settled.state = 'admitted';
        admitted.push(label);
      },
      (err: unknown) => {
        settled.state = 'rejected';
        settled.error = err;
      },
    );
    return settled;
  };
  return { admission, limits, clock, changes, admitted, enter };
}

/** Let promise reactions run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const key = (tenant: string, project = 'bot'): AdmissionKey => ({ project, tenant });

function thrown(fn: () => unknown): BerthError {
  try {
    fn();
  } catch (err) {
    if (isBerthError(err)) return err;
    throw err;
  }
  throw new Error('expected a BerthError');
}

describe('admission', () => {
  it('grants at once while every limit has room', async () => {
    const { admission, clock, enter } = setup();
    const t = enter('a', key('alice'));
    clock.now += 500;
    await settle();
    expect(t.state).toBe('admitted');
    expect(t.ticket.waitedMs()).toBe(0);
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 0, tenantsWaiting: 0 });
  });

  it('queues past the per-tenant limit; other tenants of the project still start', async () => {
    const { admission, clock, enter } = setup({ perTenant: 2 });
    const a1 = enter('a1', key('alice'));
    enter('a2', key('alice'));
    const a3 = enter('a3', key('alice'));
    const b1 = enter('b1', key('bob'));
    await settle();
    expect(a3.state).toBe('waiting');
    expect(b1.state).toBe('admitted');
    expect(admission.stats()).toEqual({ inFlight: 3, queued: 1, tenantsWaiting: 1 });
    clock.now += 1234;
    expect(a3.ticket.waitedMs()).toBe(1234);
    a1.ticket.release();
    await settle();
    expect(a3.state).toBe('admitted');
    clock.now += 99;
    expect(a3.ticket.waitedMs()).toBe(1234);
  });

  it('queues past the global limit', async () => {
    const { enter } = setup({ global: 2 });
    const a = enter('a', key('alice'));
    enter('b', key('bob', 'other'));
    const c = enter('c', key('carol', 'third'));
    await settle();
    expect(c.state).toBe('waiting');
    a.ticket.release();
    await settle();
    expect(c.state).toBe('admitted');
  });

  it('queues past the per-project limit; another project still starts', async () => {
    const { enter } = setup({ perProject: 2 });
    const x = enter('x', key('x', 'p1'));
    enter('y', key('y', 'p1'));
    const z = enter('z', key('z', 'p1'));
    const w = enter('w', key('w', 'p2'));
    await settle();
    expect(z.state).toBe('waiting');
    expect(w.state).toBe('admitted');
    x.ticket.release();
    await settle();
    expect(z.state).toBe('admitted');
  });

  it("serves tenants round-robin: one tenant's burst does not hold back another's first run", async () => {
    const { admission, enter, admitted } = setup({ global: 2, perTenant: 2 });
    // 2 run, 25 wait: a quarter of the queue (100) is one tenant's share; the next is BUSY.
    const burst = Array.from({ length: 27 }, (_, i) => enter(`A${i + 1}`, key('alice')));
    const refused = thrown(() => admission.enter(key('alice')));
    expect(refused.code).toBe('BUSY');
    expect(refused.message).toContain('this tenant has 25 runs waiting');
    const b = enter('B1', key('bob'));
    await settle();
    expect(admitted).toEqual(['A1', 'A2']);
    expect(b.state).toBe('waiting');
    burst[0]!.ticket.release();
    await settle();
    expect(admitted).toEqual(['A1', 'A2', 'B1']);
    burst[1]!.ticket.release();
    await settle();
    expect(admitted).toEqual(['A1', 'A2', 'B1', 'A3']);
  });

  it('walks the ring in turn across every waiting tenant', async () => {
    const { enter, admitted } = setup({ global: 1, perTenant: 1 });
    const all = [enter('A1', key('alice'))];
    for (const [label, tenant] of [
      ['A', 'alice'],
      ['B', 'bob'],
      ['C', 'carol'],
    ] as const) {
      for (let i = 2; i <= 4; i += 1) all.push(enter(`${label}${i}`, key(tenant)));
    }
    await settle();
    for (let i = 0; i < 9; i += 1) {
      all.find((t) => t.label === admitted.at(-1))!.ticket.release();
      await settle();
    }
    expect(admitted).toEqual(['A1', 'B2', 'C2', 'A2', 'B3', 'C3', 'A3', 'B4', 'C4', 'A4']);
  });

  it('passes over a waiting tenant its own limit holds back', async () => {
    const { enter, admitted } = setup({ global: 3, perProject: 1 });
    const p = enter('P1', key('alice', 'busy'));
    enter('P2', key('bob', 'busy'));
    const q = enter('Q1', key('carol', 'calm'));
    await settle();
    expect(admitted).toEqual(['P1', 'Q1']);
    q.ticket.release();
    await settle();
    expect(admitted).toEqual(['P1', 'Q1']);
    p.ticket.release();
    await settle();
    expect(admitted).toEqual(['P1', 'Q1', 'P2']);
  });

  it('refuses with BUSY and a Retry-After estimate when the queue is full', async () => {
    const { admission, enter, clock } = setup({ global: 1, queue: 2 });
    const first = enter('1', key('alice'));
    enter('2', key('bob'));
    enter('3', key('carol'));
    const e = thrown(() => admission.enter(key('dave')));
    expect(e.code).toBe('BUSY');
    expect(e.status).toBe(429);
    // No run finished yet: 5 s a run, 2 waiting for 1 slot.
    expect(e.details.retry_after).toBe(10);
    expect(e.toLine()).toContain('the server is busy; try again in 10 s');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 2, tenantsWaiting: 2 });

    // Runs that take 45 s: the estimate grows, and stays within 1..60.
    clock.now += 45_000;
    first.ticket.release();
    await settle();
    enter('4', key('erin'));
    const later = thrown(() => admission.enter(key('frank')));
    expect(later.details.retry_after).toBe(60);
  });

  it('with queue 0 refuses instead of waiting', () => {
    const { admission } = setup({ global: 1, queue: 0 });
    admission.enter(key('alice'));
    const e = thrown(() => admission.enter(key('bob')));
    expect(e.code).toBe('BUSY');
    expect(e.details.retry_after).toBeGreaterThanOrEqual(1);
    expect(e.details.retry_after).toBeLessThanOrEqual(60);
  });

  it('release of a waiting ticket takes it out of the queue', async () => {
    const { admission, enter } = setup({ global: 1 });
    const a = enter('a', key('alice'));
    const b = enter('b', key('bob'));
    const c = enter('c', key('carol'));
    b.ticket.release();
    await settle();
    expect(b.state).toBe('rejected');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 1, tenantsWaiting: 1 });
    a.ticket.release();
    await settle();
    expect(c.state).toBe('admitted');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 0, tenantsWaiting: 0 });
  });

  it('a second release changes nothing', async () => {
    const { admission, enter } = setup({ global: 1 });
    const a = enter('a', key('alice'));
    const b = enter('b', key('bob'));
    const c = enter('c', key('carol'));
    a.ticket.release();
    a.ticket.release();
    await settle();
    expect(b.state).toBe('admitted');
    expect(c.state).toBe('waiting');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 1, tenantsWaiting: 1 });
    c.ticket.release();
    c.ticket.release();
    b.ticket.release();
    b.ticket.release();
    expect(admission.stats()).toEqual({ inFlight: 0, queued: 0, tenantsWaiting: 0 });
    enter('d', key('dave'));
    enter('e', key('erin'));
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 1, tenantsWaiting: 1 });
  });

  it('drain refuses new and waiting runs, keeps runs in flight, and idle() follows the last release', async () => {
    const { admission, enter } = setup({ global: 1 });
    const a = enter('a', key('alice'));
    const b = enter('b', key('bob'));
    let idle = false;
    void admission.idle().then(() => (idle = true));
    admission.drain();
    await settle();
    expect(b.state).toBe('rejected');
    expect(isBerthError(b.error, 'SHUTTING_DOWN')).toBe(true);
    const e = thrown(() => admission.enter(key('carol')));
    expect([e.code, e.status, e.exitCode]).toEqual(['SHUTTING_DOWN', 503, 75]);
    expect(a.state).toBe('admitted');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 0, tenantsWaiting: 0 });
    expect(idle).toBe(false);
    a.ticket.release();
    await settle();
    expect(idle).toBe(true);
    await admission.idle();
  });

  it('applies limits changed between decisions', async () => {
    const { admission, limits, enter } = setup({ global: 1 });
    const a = enter('a', key('alice'));
    const b = enter('b', key('bob'));
    limits.global = 2;
    const c = enter('c', key('carol'));
    await settle();
    // The raised limit went to the run that was waiting, not to the newcomer.
    expect(b.state).toBe('admitted');
    expect(c.state).toBe('waiting');
    limits.global = 1;
    a.ticket.release();
    await settle();
    expect(c.state).toBe('waiting');
    expect(admission.stats()).toEqual({ inFlight: 1, queued: 1, tenantsWaiting: 1 });
    limits.queue = 1;
    expect(thrown(() => admission.enter(key('dave'))).code).toBe('BUSY');
  });

  it('takes any project or tenant name as a key, "__proto__" and "constructor" too', async () => {
    const { admission, enter } = setup({ perTenant: 1, perProject: 2 });
    const names = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];
    const first = enter('p1', key('constructor', '__proto__'));
    enter('p2', key('__proto__', '__proto__'));
    const p3 = enter('p3', key('toString', '__proto__'));
    const t2 = enter('t2', key('constructor', '__proto__'));
    const others = names.map((n) => enter(n, key(n, 'constructor')));
    await settle();
    expect(first.state).toBe('admitted');
    expect(p3.state).toBe('waiting');
    expect(t2.state).toBe('waiting');
    expect(others.map((o) => o.state)).toEqual(['admitted', 'admitted', 'waiting', 'waiting']);
    first.ticket.release();
    await settle();
    expect(p3.state).toBe('admitted');
    expect(admission.stats()).toEqual({ inFlight: 4, queued: 3, tenantsWaiting: 3 });
  });

  it('reports every change to onChange', () => {
    const { admission, changes } = setup({ global: 1 });
    const t: Ticket = admission.enter(key('alice'));
    admission.enter(key('bob'));
    t.release();
    expect(changes).toEqual([
      { inFlight: 1, queued: 0, tenantsWaiting: 0 },
      { inFlight: 1, queued: 1, tenantsWaiting: 1 },
      { inFlight: 1, queued: 0, tenantsWaiting: 0 },
    ]);
  });

  it('idle() resolves at once when nothing is in flight', async () => {
    const { admission } = setup();
    await admission.idle();
  });
});

describe('admission limits from the host and berth.yaml', () => {
  it('derives defaults from cores and memory', () => {
    expect(defaultAdmissionLimits({ cpus: 1, memoryBytes: 0.5 * GiB })).toEqual({ global: 2, perProject: 2, perTenant: 2, queue: 50 });
    expect(defaultAdmissionLimits({ cpus: 8, memoryBytes: 8 * GiB })).toEqual({ global: 16, perProject: 16, perTenant: 2, queue: 400 });
    expect(defaultAdmissionLimits({ cpus: 4, memoryBytes: 64 * GiB })).toEqual({ global: 16, perProject: 16, perTenant: 2, queue: 400 });
    expect(defaultAdmissionLimits({ cpus: 512, memoryBytes: 4096 * GiB }).global).toBe(1024);
  });

  it('fills what berth.yaml leaves out from the host', () => {
    const host = { cpus: 8, memoryBytes: 8 * GiB };
    expect(admissionLimitsOf(BerthConfigSchema.parse({}), host)).toEqual({ global: 16, perProject: 16, perTenant: 2, queue: 400 });
    expect(admissionLimitsOf(BerthConfigSchema.parse({ runs: { max_concurrent: 4 } }), host)).toEqual({
      global: 4,
      perProject: 4,
      perTenant: 2,
      queue: 100,
    });
    expect(admissionLimitsOf(BerthConfigSchema.parse({ runs: { per_project: 6, per_tenant: 3, queue: 0 } }), host)).toEqual({
      global: 16,
      perProject: 6,
      perTenant: 3,
      queue: 0,
    });
    // Above a limit derived from a small host, a per-project or per-tenant limit is cut to it.
    expect(admissionLimitsOf(BerthConfigSchema.parse({ runs: { per_project: 8, per_tenant: 8 } }), { cpus: 1, memoryBytes: GiB })).toEqual({
      global: 2,
      perProject: 2,
      perTenant: 2,
      queue: 50,
    });
  });
});

describe('berth.yaml runs:', () => {
  const parse = (runs: unknown) => parseOrThrow(BerthConfigSchema, { runs }, 'berth.yaml').runs;
  const issuesOf = (runs: unknown) => {
    try {
      parse(runs);
    } catch (err) {
      expect(isBerthError(err, 'CONFIG_INVALID')).toBe(true);
      return (err as BerthError).details.issues;
    }
    throw new Error('expected a refusal');
  };

  it('is optional; drain_seconds defaults to 30, warm containers to 5 minutes idle and 200 at most, 2 pre-started per shape', () => {
    expect(BerthConfigSchema.parse({}).runs).toEqual({ drain_seconds: 30, warm_idle_seconds: 300, warm_max: 200, pool: 2 });
  });

  it('takes every key', () => {
    const runs = {
      max_concurrent: 8,
      per_project: 4,
      per_tenant: 2,
      queue: 100,
      drain_seconds: 10,
      warm_idle_seconds: 0,
      warm_max: 5,
      pool: 0,
    };
    expect(parse(runs)).toEqual(runs);
  });

  it('refuses an unknown key, naming the closest one it has', () => {
    expect(issuesOf({ max_concurent: 4 })).toEqual([
      { field: 'runs.max_concurent', reason: 'unknown field; did you mean "max_concurrent"?' },
    ]);
    expect(issuesOf({ bogus: 4 })).toEqual([{ field: 'runs.bogus', reason: 'unknown field' }]);
  });

  it('refuses per_tenant or per_project above max_concurrent, naming the field', () => {
    expect(issuesOf({ max_concurrent: 2, per_tenant: 3 })).toEqual([
      { field: 'runs.per_tenant', reason: 'must be at most max_concurrent (2)' },
    ]);
    expect(issuesOf({ max_concurrent: 2, per_project: 3, per_tenant: 1 })).toEqual([
      { field: 'runs.per_project', reason: 'must be at most max_concurrent (2)' },
    ]);
    expect(issuesOf({ per_project: 2, per_tenant: 3 })).toEqual([{ field: 'runs.per_tenant', reason: 'must be at most per_project (2)' }]);
  });

  it('refuses values out of range', () => {
    expect(issuesOf({ max_concurrent: 0 })?.map((i) => i.field)).toEqual(['runs.max_concurrent']);
    expect(issuesOf({ max_concurrent: 1025 })?.map((i) => i.field)).toEqual(['runs.max_concurrent']);
    expect(issuesOf({ queue: 100_001 })?.map((i) => i.field)).toEqual(['runs.queue']);
    expect(issuesOf({ drain_seconds: 3601 })?.map((i) => i.field)).toEqual(['runs.drain_seconds']);
    expect(issuesOf({ per_tenant: 1.5 })?.map((i) => i.field)).toEqual(['runs.per_tenant']);
  });
});
