# Ethernet frames sent raw on veth0: IPv4/TCP to 10.9.0.2 port 80 and IPv4/UDP port 53.
import socket, struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("veth0", 0))
def ip(proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, proto, 0, bytes([10,9,0,1]), bytes([10,9,0,2]))
    return h + payload
eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
for i in range(3):
    tcp = struct.pack("!HHIIBBHHH", 40000 + i, 80, 1, 0, 0x50, 0x02, 1024, 0, 0)
    s.send(eth + ip(6, tcp))
for i in range(2):
    udp = struct.pack("!HHHH", 40000 + i, 53, 8 + 30, 0) + b"d" * 30
    s.send(eth + ip(17, udp))
