# Regenerates libpcap-filters.txt from a libpcap checkout:
#   perl libpcap-filters.pl path/to/libpcap/testprogs/TESTrun > body.txt
# (then put the header of libpcap-filters.txt above the output).
open my $f, '<', $ARGV[0] or die "usage: $0 TESTrun\n";
my @l = <$f>;
my $code = join '', @l[60..28344];
# Skips that depend on the host (name databases, OS, C library) count as skipped;
# skips on libpcap's build options (BDEBUG...) do not change the expressions.
$code =~ s/^sub (skip_\w+)/sub orig_$1/mg;
$code = q{
sub skip_config_def1 { '' } sub skip_config_not_def1 { '' }
sub skip_os { 'host-dependent' } sub skip_os_not { 'host-dependent' }
sub skip_big_endian { '' } sub skip_little_endian { '' }
sub AUTOLOAD { our $AUTOLOAD; return "host-dependent" if $AUTOLOAD =~ /::skip_/; return 1 if $AUTOLOAD =~ /GetOptions|read_config_h|usage/; die "undefined $AUTOLOAD" }
} . $code;
$code .= q{
my %seen; my @acc; my @rej;
for my $b (@filter_accept_blocks) {
  next unless $b->{DLT} eq 'EN10MB';
  next if defined $b->{skip} && $b->{skip} ne '';
  next if $b->{linuxext};
  next if defined $b->{netmask};
  next if defined $b->{generate_offline_filter};
  for my $e (@{$b->{aliases}}) { next if $e =~ /^_/; next if $seen{$e}++; push @acc, $e; }
}
for my $t (@filter_reject_tests) {
  next unless defined $t->{DLT} && $t->{DLT} eq 'EN10MB' && defined $t->{expr};
  next if defined $t->{skip} && $t->{skip} ne '';
  next if defined $t->{netmask};
  next if $seen{$t->{expr}}++; push @rej, $t->{expr};
}
for (@acc,@rej) { s/\s+/ /g; s/^ | $//g; } print "accept\t$_\n" for @acc; print "reject\t$_\n" for @rej;
};
no strict; eval $code; die $@ if $@;
