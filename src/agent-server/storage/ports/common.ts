// Shapes every port of the agent's storage shares.

export type Json = Record<string, unknown>;

export type IfExists = 'raise' | 'do_nothing';

export type SortOrder = 'asc' | 'desc';
