import { CHAOS_CASES, chaosTest } from './chaos-case.js';

chaosTest(CHAOS_CASES.aimedOnCluster);
