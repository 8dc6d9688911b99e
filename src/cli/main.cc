#include <cstdio>
int main() { std::puts("fay"); return 0; }
