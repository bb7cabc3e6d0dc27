/** Where the tenant's workspace is inside every container: the plan mounts it there, the shell policy judges paths against it. */
export const WORKSPACE_MOUNT = '/workspace';
