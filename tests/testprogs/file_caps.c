// file_caps: in the working directory, creates x (mode 0755, content "evil"), gives it the
// file capability cap_setuid (security.capability, a VFS v2 record) and the xattr user.note =
// "kept", through fsetxattr on its descriptor, then closes it. For replay's safety tests:
// a file capability is a setuid bit by another name. Exits 1 if a call fails.
#include <fcntl.h>
#include <stdint.h>
#include <sys/xattr.h>
#include <unistd.h>

int main(void) {
  int fd = open("x", O_CREAT | O_WRONLY | O_TRUNC, 0755);
  if (fd < 0 || write(fd, "evil", 4) != 4) return 1;
  // struct vfs_cap_data, revision 2: magic_etc, then {permitted, inheritable} low and high.
  uint32_t cap[5] = {0x02000001, 1u << 7, 0, 0, 0};  // CAP_SETUID is bit 7
  if (fsetxattr(fd, "security.capability", cap, sizeof cap, 0) != 0) return 1;
  if (fsetxattr(fd, "user.note", "kept", 4, 0) != 0) return 1;
  return close(fd) == 0 ? 0 : 1;
}
