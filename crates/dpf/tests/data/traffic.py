# Traffic for the test captures: TCP to 127.0.0.1:8080 and :9090, UDP to :5353,
# over the loopback interface of a throwaway network namespace.
import socket, time, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 8080)); srv.listen(8)
for i in range(3):
    c = socket.create_connection(("127.0.0.1", 8080)); s, _ = srv.accept()
    c.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100); s.recv(4096); s.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + b"y" * 200)
    c.recv(4096); c.close(); s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(4):
    u.sendto(b"q" * (20 + 30 * i), ("127.0.0.1", 5353))
try:
    socket.create_connection(("127.0.0.1", 9090), timeout=1)
except OSError:
    pass
time.sleep(0.3)
