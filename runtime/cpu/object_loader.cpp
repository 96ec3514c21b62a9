// A loader of x86-64 relocatable ELF objects for CPU kernels: sections, symbols, relocations, page protections.
#include "runtime/cpu/object_loader.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

namespace jit::detail {

ObjectImage::~ObjectImage() {
  if (base_) ::munmap(base_, size_);
}

namespace {

// An object larger than this is no kernel of ours: refused rather than mapped.
constexpr std::uint64_t kMaxImageBytes = 256ull << 20;
constexpr std::uint64_t kMaxAlignment = 4096;
// A stub that jumps through a slot of the GOT: jmp *rel32(%rip), padded to 8 bytes.
constexpr std::size_t kStubBytes = 8;

struct Refusal {
  std::string why;
};

[[noreturn]] void refuse(std::string why) { throw Refusal{std::move(why)}; }

// offset + length within size, without overflow.
bool fits(std::uint64_t offset, std::uint64_t length, std::uint64_t size) { return offset <= size && length <= size - offset; }

template <class T> T read_at(const std::vector<char>& bytes, std::uint64_t offset) {
  if (!fits(offset, sizeof(T), bytes.size())) refuse("truncated object");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) { return (value + alignment - 1) & ~(alignment - 1); }

// S + A - P and the like, computed modulo 2^64 (hostile values must not overflow a signed type)
// and read as the signed distance they are.
std::int64_t wrapped(std::uint64_t value) { return static_cast<std::int64_t>(value); }

// Where sections go: code, read-only data (and the GOT), writable data; each its own pages.
enum Group { kCode, kReadOnly, kWritable, kGroups };

class Loader {
 public:
  Loader(const std::vector<char>& bytes) : bytes_(bytes) {}

  LoadedObject load(const char* entry_symbol) {
    read_headers();
    read_symbols();
    plan_layout();
    map_and_copy();
    fill_got_and_stubs();
    apply_relocations();
    protect();
    void* entry = find_symbol(entry_symbol);
    LoadedObject out;
    out.image = std::move(image_);
    out.entry = entry;
    return out;
  }

 private:
  const std::vector<char>& bytes_;
  Elf64_Ehdr header_{};
  std::vector<Elf64_Shdr> sections_;
  std::vector<std::uint64_t> section_offset_;  // in the image, for allocated sections
  std::vector<bool> allocated_;
  std::uint32_t symtab_ = 0;
  std::vector<Elf64_Sym> symbols_;
  std::vector<std::string> symbol_names_;
  std::map<std::uint32_t, std::uint64_t> got_slot_;   // symbol index -> offset of its GOT slot in the image
  std::map<std::uint32_t, std::uint64_t> stub_;       // undefined symbol index -> offset of its stub
  std::vector<std::uint64_t> external_;               // resolved address of each undefined symbol (by index)
  std::uint64_t group_start_[kGroups + 1] = {};
  std::uint64_t got_offset_ = 0, stubs_offset_ = 0;
  std::unique_ptr<ObjectImage> owner_;
  std::shared_ptr<ObjectImage> image_;
  char* base_ = nullptr;

  const char* name_in(std::uint32_t strtab, std::uint32_t offset) const {
    if (strtab >= sections_.size() || sections_[strtab].sh_type != SHT_STRTAB) refuse("a name table that is not one");
    const Elf64_Shdr& s = sections_[strtab];
    if (offset >= s.sh_size) refuse("a name outside its table");
    const char* start = bytes_.data() + s.sh_offset + offset;
    if (!std::memchr(start, '\0', s.sh_size - offset)) refuse("a name without its end");
    return start;
  }

  void read_headers() {
    header_ = read_at<Elf64_Ehdr>(bytes_, 0);
    if (std::memcmp(header_.e_ident, ELFMAG, SELFMAG) != 0) refuse("not an ELF object");
    if (header_.e_ident[EI_CLASS] != ELFCLASS64 || header_.e_ident[EI_DATA] != ELFDATA2LSB) refuse("not a 64-bit little-endian ELF object");
    if (header_.e_type != ET_REL) refuse("not a relocatable object");
    if (header_.e_machine != EM_X86_64) refuse("not x86-64 code");
    if (header_.e_shentsize != sizeof(Elf64_Shdr) || header_.e_shnum == 0 || header_.e_shnum >= SHN_LORESERVE)
      refuse("an unexpected section table");
    if (!fits(header_.e_shoff, std::uint64_t{header_.e_shnum} * sizeof(Elf64_Shdr), bytes_.size())) refuse("truncated section table");
    sections_.resize(header_.e_shnum);
    std::memcpy(sections_.data(), bytes_.data() + header_.e_shoff, sections_.size() * sizeof(Elf64_Shdr));
    for (std::size_t i = 1; i < sections_.size(); ++i) {
      const Elf64_Shdr& s = sections_[i];
      if (s.sh_type != SHT_NOBITS && !fits(s.sh_offset, s.sh_size, bytes_.size()))
        refuse("a section outside the object");
      if (s.sh_type == SHT_SYMTAB) {
        if (symtab_) refuse("two symbol tables");
        symtab_ = static_cast<std::uint32_t>(i);
      }
      const bool alloc = (s.sh_flags & SHF_ALLOC) != 0;
      if (alloc && s.sh_type == SHT_NULL) refuse("an unexpected section type");
      if (alloc && (s.sh_flags & SHF_TLS)) refuse("thread-local storage");
      if (alloc && (s.sh_type == SHT_INIT_ARRAY || s.sh_type == SHT_FINI_ARRAY || s.sh_type == SHT_PREINIT_ARRAY) && s.sh_size)
        refuse("static constructors or destructors");
      if (s.sh_type == SHT_REL && s.sh_info < sections_.size() && (sections_[s.sh_info].sh_flags & SHF_ALLOC))
        refuse("REL relocations");
    }
    if (!symtab_) refuse("no symbol table");
  }

  void read_symbols() {
    const Elf64_Shdr& s = sections_[symtab_];
    if (s.sh_entsize != sizeof(Elf64_Sym) || s.sh_size % sizeof(Elf64_Sym) != 0) refuse("an unexpected symbol table");
    const std::size_t n = s.sh_size / sizeof(Elf64_Sym);
    if (n == 0) refuse("an empty symbol table");
    symbols_.resize(n);
    std::memcpy(symbols_.data(), bytes_.data() + s.sh_offset, n * sizeof(Elf64_Sym));
    symbol_names_.resize(n);
    external_.assign(n, 0);
    for (std::size_t i = 1; i < n; ++i) {
      const Elf64_Sym& sym = symbols_[i];
      symbol_names_[i] = name_in(s.sh_link, sym.st_name);
      if (sym.st_shndx == SHN_COMMON) refuse("common symbols");
      if (ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC) refuse("indirect functions");
      if (ELF64_ST_TYPE(sym.st_info) == STT_TLS) refuse("thread-local storage");
      if (sym.st_shndx == SHN_UNDEF) {
        void* address = ::dlsym(RTLD_DEFAULT, symbol_names_[i].c_str());
        if (!address && ELF64_ST_BIND(sym.st_info) != STB_WEAK) refuse("an undefined symbol '" + symbol_names_[i] + "'");
        external_[i] = reinterpret_cast<std::uint64_t>(address);
        if (address) stub_[static_cast<std::uint32_t>(i)] = 0;
      } else if (sym.st_shndx != SHN_ABS && sym.st_shndx >= sections_.size()) {
        refuse("a symbol in an unknown section");
      }
    }
  }

  Group group_of(const Elf64_Shdr& s) const {
    if (s.sh_flags & SHF_EXECINSTR) return kCode;
    return (s.sh_flags & SHF_WRITE) ? kWritable : kReadOnly;
  }

  // Every symbol a GOT-relative relocation names gets a slot; every undefined one a stub too.
  void plan_layout() {
    for (const Elf64_Shdr& r : sections_) {
      if (r.sh_type != SHT_RELA || r.sh_info >= sections_.size() || !(sections_[r.sh_info].sh_flags & SHF_ALLOC)) continue;
      if (r.sh_link != symtab_ || r.sh_entsize != sizeof(Elf64_Rela) || r.sh_size % sizeof(Elf64_Rela) != 0)
        refuse("an unexpected relocation table");
      for (std::uint64_t at = r.sh_offset; at < r.sh_offset + r.sh_size; at += sizeof(Elf64_Rela)) {
        const auto rela = read_at<Elf64_Rela>(bytes_, at);
        const std::uint32_t type = ELF64_R_TYPE(rela.r_info), sym = ELF64_R_SYM(rela.r_info);
        if (sym >= symbols_.size()) refuse("a relocation of an unknown symbol");
        if (type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX || type == R_X86_64_REX_GOTPCRELX) got_slot_[sym] = 0;
      }
    }
    for (auto& [sym, offset] : stub_) got_slot_[sym] = 0;

    std::uint64_t size = 0;
    allocated_.assign(sections_.size(), false);
    section_offset_.assign(sections_.size(), 0);
    for (int g = 0; g < kGroups; ++g) {
      size = align_up(size, static_cast<std::uint64_t>(::getpagesize()));
      group_start_[g] = size;
      for (std::size_t i = 1; i < sections_.size(); ++i) {
        const Elf64_Shdr& s = sections_[i];
        if (!(s.sh_flags & SHF_ALLOC) || group_of(s) != g) continue;
        const std::uint64_t alignment = s.sh_addralign ? s.sh_addralign : 1;
        if (alignment > kMaxAlignment || (alignment & (alignment - 1))) refuse("an unexpected section alignment");
        if (s.sh_size > kMaxImageBytes) refuse("a section too large for a kernel");
        size = align_up(size, alignment);
        section_offset_[i] = size;
        allocated_[i] = true;
        size += s.sh_size;
      }
      if (g == kCode) {
        size = align_up(size, kStubBytes);
        stubs_offset_ = size;
        size += stub_.size() * kStubBytes;
      } else if (g == kReadOnly) {
        size = align_up(size, 8);
        got_offset_ = size;
        size += got_slot_.size() * 8;
      }
      if (size > kMaxImageBytes) refuse("too large for a kernel");
    }
    group_start_[kGroups] = align_up(size, static_cast<std::uint64_t>(::getpagesize()));
    std::uint64_t n = 0;
    for (auto& [sym, offset] : got_slot_) offset = got_offset_ + 8 * n++;
    n = 0;
    for (auto& [sym, offset] : stub_) offset = stubs_offset_ + kStubBytes * n++;
  }

  void map_and_copy() {
    const std::size_t size = group_start_[kGroups];
    void* base = ::mmap(nullptr, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) refuse("no memory to map the object into");
    image_ = std::make_shared<ObjectImage>(base, size ? size : 1);
    base_ = static_cast<char*>(base);
    for (std::size_t i = 1; i < sections_.size(); ++i)
      if (allocated_[i] && sections_[i].sh_type != SHT_NOBITS && sections_[i].sh_size)
        std::memcpy(base_ + section_offset_[i], bytes_.data() + sections_[i].sh_offset, sections_[i].sh_size);
  }

  // The address a symbol stands for in the image (or in the process, for an undefined one).
  std::uint64_t address_of(std::uint32_t index) const {
    if (index >= symbols_.size()) refuse("a reference to a symbol that does not exist");
    const Elf64_Sym& sym = symbols_[index];
    if (sym.st_shndx == SHN_UNDEF) {
      if (index >= external_.size()) refuse("an undefined symbol that was not resolved");
      return external_[index];
    }
    if (sym.st_shndx == SHN_ABS) return sym.st_value;
    // any other reserved index (SHN_COMMON, ...) or one past the section table: nothing this loader places
    if (sym.st_shndx >= sections_.size() || sym.st_shndx >= allocated_.size() || sym.st_shndx >= section_offset_.size())
      refuse("a symbol in a section that does not exist (index " + std::to_string(sym.st_shndx) + ")");
    if (!allocated_[sym.st_shndx]) refuse("a reference to a section that is not loaded");
    if (sym.st_value > sections_[sym.st_shndx].sh_size) refuse("a symbol outside its section");
    return reinterpret_cast<std::uint64_t>(base_) + section_offset_[sym.st_shndx] + sym.st_value;
  }

  void fill_got_and_stubs() {
    for (const auto& [sym, offset] : got_slot_) {
      const std::uint64_t value = address_of(sym);
      std::memcpy(base_ + offset, &value, 8);
    }
    for (const auto& [sym, offset] : stub_) {
      // jmp *disp32(%rip): FF 25 disp32, the displacement from the stub's end to its GOT slot.
      const std::int64_t disp = static_cast<std::int64_t>(got_slot_.at(sym)) - static_cast<std::int64_t>(offset + 6);
      const std::int32_t disp32 = static_cast<std::int32_t>(disp);
      const unsigned char stub[kStubBytes] = {0xFF, 0x25, 0, 0, 0, 0, 0xCC, 0xCC};
      std::memcpy(base_ + offset, stub, kStubBytes);
      std::memcpy(base_ + offset + 2, &disp32, 4);
    }
  }

  void write32(char* at, std::int64_t value, bool is_signed) {
    const bool ok = is_signed ? value >= std::numeric_limits<std::int32_t>::min() && value <= std::numeric_limits<std::int32_t>::max()
                              : value >= 0 && value <= std::numeric_limits<std::uint32_t>::max();
    if (!ok) refuse("a 32-bit relocation out of range");
    const std::uint32_t v = static_cast<std::uint32_t>(value);
    std::memcpy(at, &v, 4);
  }

  void apply_relocations() {
    const auto base = reinterpret_cast<std::uint64_t>(base_);
    for (const Elf64_Shdr& r : sections_) {
      if (r.sh_type != SHT_RELA || r.sh_info >= sections_.size() || !allocated_[r.sh_info]) continue;
      const Elf64_Shdr& target = sections_[r.sh_info];
      if (target.sh_type == SHT_NOBITS) refuse("relocations in a section without contents");
      for (std::uint64_t at = r.sh_offset; at < r.sh_offset + r.sh_size; at += sizeof(Elf64_Rela)) {
        const auto rela = read_at<Elf64_Rela>(bytes_, at);
        const std::uint32_t type = ELF64_R_TYPE(rela.r_info), sym = ELF64_R_SYM(rela.r_info);
        const std::uint64_t width = (type == R_X86_64_64 || type == R_X86_64_PC64) ? 8 : 4;
        if (type == R_X86_64_NONE) continue;
        if (!fits(rela.r_offset, width, target.sh_size)) refuse("a relocation outside its section");
        char* place = base_ + section_offset_[r.sh_info] + rela.r_offset;
        const std::uint64_t P = base + section_offset_[r.sh_info] + rela.r_offset;
        const auto A = static_cast<std::uint64_t>(rela.r_addend);
        switch (type) {
          case R_X86_64_64: {
            const std::uint64_t v = address_of(sym) + A;
            std::memcpy(place, &v, 8);
            break;
          }
          case R_X86_64_PC64: {
            const std::uint64_t v = address_of(sym) + A - P;
            std::memcpy(place, &v, 8);
            break;
          }
          case R_X86_64_PC32:
          case R_X86_64_PLT32: {
            std::int64_t v = wrapped(address_of(sym) + A - P);
            // A function of the process out of reach of 32 bits: through its stub.
            if ((v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()) && stub_.count(sym))
              v = wrapped(base + stub_.at(sym) + A - P);
            write32(place, v, true);
            break;
          }
          case R_X86_64_GOTPCREL:
          case R_X86_64_GOTPCRELX:
          case R_X86_64_REX_GOTPCRELX:
            write32(place, wrapped(base + got_slot_.at(sym) + A - P), true);
            break;
          case R_X86_64_32:
            write32(place, wrapped(address_of(sym) + A), false);
            break;
          case R_X86_64_32S:
            write32(place, wrapped(address_of(sym) + A), true);
            break;
          default:
            refuse("relocation type " + std::to_string(type));
        }
      }
    }
  }

  void protect() {
    const int modes[kGroups] = {PROT_READ | PROT_EXEC, PROT_READ, PROT_READ | PROT_WRITE};
    for (int g = 0; g < kGroups; ++g) {
      const std::uint64_t length = group_start_[g + 1] - group_start_[g];
      if (length && ::mprotect(base_ + group_start_[g], length, modes[g]) != 0) refuse("mprotect failed");
    }
  }

  void* find_symbol(const char* name) const {
    for (std::size_t i = 1; i < symbols_.size(); ++i) {
      const Elf64_Sym& sym = symbols_[i];
      const int bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx != SHN_UNDEF && (bind == STB_GLOBAL || bind == STB_WEAK) && symbol_names_[i] == name) {
        if (sym.st_shndx == SHN_ABS || !allocated_[sym.st_shndx] || !(sections_[sym.st_shndx].sh_flags & SHF_EXECINSTR))
          refuse(std::string("'") + name + "' is not code");
        return reinterpret_cast<void*>(address_of(static_cast<std::uint32_t>(i)));
      }
    }
    refuse(std::string("no '") + name + "'");
  }
};

}  // namespace

LoadedObject load_relocatable_object(const std::vector<char>& bytes, const char* entry_symbol) {
  try {
    return Loader(bytes).load(entry_symbol);
  } catch (const Refusal& r) {
    LoadedObject out;
    out.refused = r.why;
    return out;
  }
}

}  // namespace jit::detail
