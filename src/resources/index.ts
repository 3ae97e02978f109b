export * from './meta.ts';
export * from './agent-deployment.ts';
export * from './agent-revision.ts';
export * from './conditions.ts';
export * from './names.ts';
export * from './revision.ts';
export * from './hosts.ts';
