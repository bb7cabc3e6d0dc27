import { describe, expect, it } from 'vitest';
import { toCreateOptions } from '../../src/launch/docker/create.js';
import { toContainerSettings, type ContainerSettings } from '../../src/launch/docker/inspect.js';
import { IPC_SYSCTLS, type RunPlan } from '../../src/plan/run-plan.js';
import {
  CONFINEMENT_CHECKS,
  runtimeProblems,
  ipcNamespaceProblems,
  judge,
  lsmProblems,
  memoryLimitProblems,
  pidNamespaceProblems,
  pidsLimitProblems,
  privilegeProblems,
  seccompProblems,
  type ObservedContainer,
} from '../../src/cli/verify/confinement.js';
import { compareEngineSettings } from '../../src/cli/verify/engine-settings.js';
import type { HostFacts } from '../../src/cli/verify/host-facts.js';
import { parseProbe, type ProbeFacts } from '../../src/cli/verify/probe.js';

/** `berth verify`'s kernel-side checks as data: what a container said (or the engine holds) against its plan. */
const plan: RunPlan = {
  image: 'berth/shell:latest',
  runtime: 'runc',
  argv: ['sh', '-c', 'echo hi'],
  exec: ['sh', '-c', 'echo hi'],
  keepAlive: ['berth-bridge', 'idle'],
  cwd: '/workspace',
  user: '10001:10001',
  mounts: [],
  env: {},
  network: 'none',
  sockets: [],
  readOnlyRootfs: true,
  sysctls: { ...IPC_SYSCTLS },
  limits: { memoryBytes: 512 * 2 ** 20, nanoCpus: 1e9, pids: 256, timeoutMs: 60_000, outputBytes: 65_536 },
  labels: {},
  prepare: { rwRoot: '/tmp/x', rwRootPath: [], files: [], dirs: [], mountpoints: [] },
  warnings: [],
};
const relayed: RunPlan = {
  ...plan,
  argv: ['/usr/local/bin/berth-bridge', 'relay', '41401=/run/berth/egress.sock', '--', 'sh', '-c', 'echo hi'],
};

const host: HostFacts = {
  pidNamespaces: ['pid:[4026531836]'],
  ipcNamespaces: ['ipc:[4026531839]'],
  apparmor: false,
  selinux: false,
  kernel: '6.18.0-test',
};

/** What the probe printed in a berth container on this host (cgroup v1). */
const confined: ProbeFacts = {
  Seccomp: '2',
  NoNewPrivs: '1',
  CapEff: '0000000000000000',
  pidns: 'pid:[4026532913]',
  ipcns: 'ipc:[4026532912]',
  init: 'sh',
  label: '',
  apparmor: '',
  'pids.max': '256',
  'memory.max': '536870912',
  kernel: '6.18.0-test',
  sentry: '',
};
/** ... and through the weakening Docker-socket proxy (M3). */
const weakened: ProbeFacts = {
  ...confined,
  Seccomp: '0',
  pidns: 'pid:[4026531836]',
  ipcns: 'ipc:[4026531839]',
  init: 'process_api',
  'pids.max': 'max',
  'memory.max': '9223372036854771712',
};

describe('the probe', () => {
  it('reads its @verify lines from stderr (the first of each key), and nothing else', () => {
    const stderr = [
      'something the command said',
      '@verify Seccomp 2',
      '@verify pidns pid:[4026532913]',
      '@verify label docker-default (enforce)',
      '@verify Seccomp 0',
      '@verify unknown x',
      '@verify pids.max ',
    ].join('\n');
    expect(parseProbe(stderr)).toEqual({
      ...Object.fromEntries(Object.keys(confined).map((k) => [k, ''])),
      Seccomp: '2',
      pidns: 'pid:[4026532913]',
      label: 'docker-default (enforce)',
    });
  });

  it('says nothing when the probe never ran', () => {
    expect(parseProbe('sh: not found\n')).toBeUndefined();
  });
});

describe('the runtime that answers inside', () => {
  const runsc: RunPlan = { ...plan, runtime: 'runsc' };
  const gvisor: ProbeFacts = { ...confined, kernel: '4.4.0', sentry: 'Starting gVisor' };
  it('runc: the host kernel answers; gVisor or another kernel there is a problem', () => {
    expect(runtimeProblems(confined, plan, host)).toEqual([]);
    expect(runtimeProblems(gvisor, plan, host)).toEqual(["runc planned, but the kernel inside is 4.4.0, not the host's 6.18.0-test"]);
  });
  it('runsc: gVisor must announce itself; the host kernel answering means the runtime was not used', () => {
    expect(runtimeProblems(gvisor, runsc, host)).toEqual([]);
    expect(runtimeProblems(confined, runsc, host)).toEqual(['runsc planned, but gVisor did not answer inside (kernel 6.18.0-test)']);
    expect(runtimeProblems({ ...confined, kernel: '' }, runsc, host)).toEqual(['its kernel release is unreadable']);
  });
  it('any other runtime (a VM) must not show the host kernel', () => {
    expect(runtimeProblems(confined, { ...plan, runtime: 'kata' }, host)).toEqual([
      "kata planned, but the host's kernel (6.18.0-test) answers inside",
    ]);
    expect(runtimeProblems({ ...confined, kernel: '6.1.0-kata' }, { ...plan, runtime: 'kata' }, host)).toEqual([]);
  });
});

describe('checks from inside', () => {
  it('a confined container: no problem anywhere', () => {
    expect([
      seccompProblems(confined),
      privilegeProblems(confined),
      lsmProblems(confined, host),
      pidNamespaceProblems(confined, plan, host),
      ipcNamespaceProblems(confined, host),
      pidsLimitProblems(confined, plan),
      memoryLimitProblems(confined, plan),
    ]).toEqual([[], [], [], [], [], [], []]);
  });

  it('the weakened container: each weakening named', () => {
    expect(seccompProblems(weakened)).toEqual(['Seccomp: 0 (no seccomp filter in force)']);
    expect(pidNamespaceProblems(weakened, plan, host)).toEqual([
      "the container is in the host's pid namespace (pid:[4026531836]): it sees every host process",
    ]);
    expect(ipcNamespaceProblems(weakened, host)).toEqual(["the container is in the host's IPC namespace (ipc:[4026531839])"]);
    expect(pidsLimitProblems(weakened, plan)).toEqual(['pids.max max (planned 256)']);
    expect(memoryLimitProblems(weakened, plan)).toEqual(['no memory limit (9223372036854771712; planned 512 MiB)']);
  });

  it("the host's namespaces as berth reads them count too, not only the init ones (a dockerd in a nested namespace)", () => {
    const nested: HostFacts = { ...host, pidNamespaces: ['pid:[4026532001]'], ipcNamespaces: ['ipc:[4026532002]'] };
    expect(pidNamespaceProblems({ ...confined, pidns: 'pid:[4026532001]' }, plan, nested)).toHaveLength(1);
    expect(ipcNamespaceProblems({ ...confined, ipcns: 'ipc:[4026532002]' }, nested)).toHaveLength(1);
  });

  it.each([
    ["the plan's own command", plan, 'sh', 0],
    ['the agent berth-bridge execs after "--"', relayed, 'sh', 0],
    ['berth-bridge itself', relayed, 'berth-bridge', 0],
    ['a stranger', plan, 'systemd', 1],
  ] as const)('pid 1 is %s', (_what, p, init, problems) => {
    expect(pidNamespaceProblems({ ...confined, init }, p, host)).toHaveLength(problems);
  });

  it.each([
    ['v2, no limit', 'max', ['no memory limit (max; planned 512 MiB)']],
    ['v2, another limit', '268435456', ['memory limit 256 MiB (planned 512 MiB)']],
    ['unreadable', '', ['memory limit unreadable (planned 512 MiB)']],
    ['v2, as planned', '536870912', []],
  ] as const)('memory: %s', (_what, value, problems) => {
    expect(memoryLimitProblems({ ...confined, 'memory.max': value }, plan)).toEqual(problems);
  });

  it('capabilities and no-new-privileges', () => {
    expect(privilegeProblems({ ...confined, CapEff: '00000000a80425fb', NoNewPrivs: '0' })).toEqual([
      'CapEff: 00000000a80425fb (capabilities in force)',
      'NoNewPrivs: 0',
    ]);
  });

  it.each([
    ['no LSM on the host', host, '', []],
    ['AppArmor, docker-default', { ...host, apparmor: true }, 'docker-default (enforce)', []],
    [
      'AppArmor, unconfined',
      { ...host, apparmor: true },
      'unconfined',
      ['AppArmor is on in this kernel but the container runs unconfined'],
    ],
    ['SELinux, container_t', { ...host, selinux: true }, 'system_u:system_r:container_t:s0:c1,c2', []],
    [
      'SELinux, spc_t',
      { ...host, selinux: true },
      'system_u:system_r:spc_t:s0',
      ['SELinux is enforcing but the container\'s label is "system_u:system_r:spc_t:s0" (unconfined)'],
    ],
  ] as const)('LSM label: %s', (_what, h, label, problems) => {
    expect(lsmProblems({ ...confined, label }, h)).toEqual(problems);
  });

  it('AppArmor the container sees in its kernel counts even when berth cannot read the host flag', () => {
    expect(lsmProblems({ ...confined, apparmor: 'Y', label: 'unconfined' }, host)).toHaveLength(1);
  });
});

describe("the engine's inspect against the plan", () => {
  /** What the engine holds when it kept berth's create options as they were. */
  const kept = (p: RunPlan): ContainerSettings => {
    const o = toCreateOptions(p);
    return toContainerSettings({ Config: { User: o.User } as never, HostConfig: o.HostConfig as never });
  };

  it("berth's own translation of a plan compares clean", () => {
    expect(compareEngineSettings(kept(plan), plan)).toEqual([]);
  });

  it('the weakening proxy: every difference named as docker inspect names it', () => {
    const proxy: ContainerSettings = {
      ...kept(plan),
      SecurityOpt: ['no-new-privileges', 'seccomp=unconfined', 'apparmor=unconfined', 'label=disable'],
      PidsLimit: 0,
      Memory: 0,
      MemorySwap: 0,
      NanoCpus: 0,
      IpcMode: 'host',
      PidMode: 'host',
    };
    expect(compareEngineSettings(proxy, plan)).toEqual([
      'Memory 0 (planned 536870912)',
      'MemorySwap 0 (planned 536870912)',
      'NanoCpus 0 (planned 1000000000)',
      'PidsLimit 0 (planned 256)',
      'SecurityOpt seccomp=unconfined',
      'SecurityOpt apparmor=unconfined',
      'SecurityOpt label=disable',
      'PidMode host (planned its own)',
      'IpcMode host (planned private)',
    ]);
  });

  it('the rest of what berth asks of every container', () => {
    const loose: ContainerSettings = {
      ...kept(plan),
      User: '0',
      NetworkMode: 'bridge',
      ReadonlyRootfs: false,
      Privileged: true,
      CapDrop: [],
      CapAdd: ['SYS_ADMIN'],
      SecurityOpt: [],
      PidMode: 'container:abc',
      IpcMode: 'shareable',
    };
    expect(compareEngineSettings(loose, plan)).toEqual([
      'User "0" (planned "10001:10001")',
      'NetworkMode "bridge" (planned "none")',
      'ReadonlyRootfs false (planned true)',
      'Privileged true (planned false)',
      'CapDrop [] (planned ["ALL"])',
      'CapAdd ["SYS_ADMIN"] (planned none)',
      'SecurityOpt without no-new-privileges',
      'PidMode container:abc (planned its own)',
      'IpcMode shareable (planned private)',
    ]);
  });

  it('an IPC sysctl dropped or changed is named', () => {
    const { 'kernel.msgmni': _dropped, ...rest } = kept(plan).Sysctls;
    expect(compareEngineSettings({ ...kept(plan), Sysctls: { ...rest, 'kernel.shmmax': '18446744073692774399' } }, plan)).toEqual([
      'Sysctls kernel.msgmni unset (planned 16)',
      'Sysctls kernel.shmmax 18446744073692774399 (planned 67108864)',
    ]);
  });

  it('an inspect answer with missing fields reads as no limit, no options', () => {
    expect(toContainerSettings({ Config: {} as never, HostConfig: { PidsLimit: null } as never })).toEqual({
      User: '',
      NetworkMode: '',
      ReadonlyRootfs: false,
      Privileged: false,
      CapAdd: [],
      CapDrop: [],
      SecurityOpt: [],
      Memory: 0,
      MemorySwap: 0,
      NanoCpus: 0,
      PidsLimit: 0,
      PidMode: '',
      IpcMode: '',
      Sysctls: {},
      Runtime: '',
    });
  });
});

describe('one verify line per check over every container', () => {
  const settings = (() => {
    const o = toCreateOptions(plan);
    return toContainerSettings({ Config: { User: o.User } as never, HostConfig: o.HostConfig as never });
  })();
  const good: ObservedContainer = { id: 'a', plan, inside: confined, engine: settings };
  const byName = (name: string) => CONFINEMENT_CHECKS.find((c) => c.name === name)!;

  it('held everywhere: ok, with how many containers', () => {
    expect(judge(byName('seccomp'), [good, { ...good, id: 'b' }], host)).toEqual({
      name: 'seccomp',
      status: 'ok',
      detail: 'Seccomp: 2 (a filter in force) (2 containers)',
    });
  });

  it('a host without AppArmor or SELinux: a note, not a failure', () => {
    expect(judge(byName('LSM label'), [good], host)).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/^note: this kernel has neither AppArmor nor SELinux/),
    });
  });

  it('one weak container among good ones is an escape; each problem named once', () => {
    const weak = { ...good, id: 'w', inside: weakened };
    expect(judge(byName('pids limit'), [good, weak, { ...weak, id: 'w2' }], host)).toEqual({
      name: 'pids limit',
      status: 'escape',
      detail: 'pids.max max (planned 256) (2 of 3 containers)',
    });
  });

  it('a container that printed nothing from inside, or could not be inspected, does not pass', () => {
    expect(judge(byName('IPC namespace'), [{ ...good, inside: undefined }], host)).toMatchObject({
      status: 'escape',
      detail: expect.stringContaining('printed no facts from inside'),
    });
    expect(judge(byName('engine settings'), [{ ...good, engine: { error: 'no such container' } }], host)).toMatchObject({
      status: 'escape',
      detail: expect.stringContaining('could not inspect it: no such container'),
    });
  });

  it("under gVisor, what its kernel does not report inside is read from the engine's record: held when planned, an escape when weakened", () => {
    const runscPlan: RunPlan = { ...plan, runtime: 'runsc' };
    const gvisor: ObservedContainer = {
      id: 'g',
      plan: runscPlan,
      engine: { ...settings, Runtime: 'runsc' },
      inside: { ...confined, NoNewPrivs: '', ipcns: '', 'pids.max': '', 'memory.max': '', kernel: '4.4.0', sentry: 'gVisor' },
    };
    for (const name of ['capabilities', 'IPC namespace', 'pids limit', 'memory limit'])
      expect(judge(byName(name), [gvisor], host)).toMatchObject({ status: 'ok' });
    const weakened: ObservedContainer = {
      ...gvisor,
      engine: { ...settings, Runtime: 'runsc', SecurityOpt: [], IpcMode: 'host', PidsLimit: 0, Memory: 0 },
    };
    expect(judge(byName('capabilities'), [weakened], host).detail).toBe(
      "under gVisor, the engine's record: SecurityOpt without no-new-privileges (1 of 1 containers)",
    );
    expect(judge(byName('IPC namespace'), [weakened], host).detail).toBe(
      "under gVisor, the engine's record: IpcMode host (planned private) (1 of 1 containers)",
    );
    expect(judge(byName('pids limit'), [weakened], host).detail).toBe(
      "under gVisor, the engine's record: PidsLimit 0 (planned 256) (1 of 1 containers)",
    );
    expect(judge(byName('memory limit'), [weakened], host).detail).toBe(
      "under gVisor, the engine's record: Memory 0 (planned 536870912) (1 of 1 containers)",
    );
    // Without the sentry's word, the inside facts count as they are (unreadable: an escape).
    expect(judge(byName('pids limit'), [{ ...gvisor, inside: { ...gvisor.inside!, sentry: '' } }], host).status).toBe('escape');
  });

  it('no container at all: the check could not run', () => {
    expect(judge(byName('memory limit'), [], host)).toEqual({
      name: 'memory limit',
      status: 'error',
      detail: 'no container ran, so nothing could be read',
    });
  });
});
