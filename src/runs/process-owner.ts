/** Which berth process owns a run (see fs/process-identity.ts, where locks below the runs layer reach it too). */
export { ownerAlive, processIdentity } from '../fs/process-identity.js';
