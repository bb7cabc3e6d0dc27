import { createFakeLauncher, type FakeLauncherOptions } from '../helpers/fake-launcher.js';
import { contractHome } from './contract-plan.js';
import { describeLauncherContract, type ContractCommands } from './launcher-contract.js';

/** The fake's programs (test/helpers/fake-launcher.ts): its sleep counts milliseconds. */
const FAKE_COMMANDS: ContractCommands = {
  cat: (path) => ['cat', path],
  write: (path, text) => ['write', path, text],
  sleep: (seconds) => ['sleep', String(seconds * 1000)],
  flood: () => ['yes', 'berth-flood'],
  background: () => ['bg'],
  ipc: () => ['ipc'],
  hold: (mib) => ['hold', String(mib)],
  exit: (code) => ['exit', String(code)],
};

const subject = (options: FakeLauncherOptions) => async () => {
  const home = contractHome({ image: 'berth/shell:latest', runtime: 'runc' });
  return { launcher: createFakeLauncher(options), plan: home.plan, blankDir: home.home, cleanup: home.cleanup };
};

describeLauncherContract('fake', subject({}), { runtime: 'runc', warm: true, lateMounts: false, cmd: FAKE_COMMANDS });
// A launcher that keeps no warm containers for the runtime: the contract's other branch.
describeLauncherContract('fake without warm containers', subject({ warm: false }), {
  runtime: 'runc',
  warm: false,
  lateMounts: false,
  cmd: FAKE_COMMANDS,
});
