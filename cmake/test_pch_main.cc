// The program that owns the tests' precompiled header (cmake/testing.cmake,
// dfarm_test_pch); it is built, never run as a test.
int main() { return 0; }
