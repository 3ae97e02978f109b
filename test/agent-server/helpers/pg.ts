// A fresh Postgres database per test file (prefix ap_as_), dropped afterwards, on the run's test server.
import { createTestDatabase as create } from '../../support/postgres.ts';

export const createTestDatabase = () => create('ap_as_');
